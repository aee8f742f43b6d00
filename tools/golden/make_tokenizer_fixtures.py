#!/usr/bin/env python3
"""Golden fixtures for the Qwen2 byte-level BPE tokenizer (src/model/tokenizer.c).

Runs where transformers + tokenizers are installed (the GPU machine):

    python3 tools/golden/make_tokenizer_fixtures.py --tok .ref/tok --out "$OUT"

--tok is a folder with vocab.json, merges.txt and tokenizer_config.json (a copy of
the MiniMax-H3 snapshot's tokenizer/ folder).  Writes into --out:

  strings.jsonl   one object per test string:
                  {"i", "cat", "text", "fast", "slow", "decoded"[, "pyslow"]}
                  fast   = ids from Qwen2TokenizerFast (the class the diffusers
                           pipeline uses), add_special_tokens=False
                  slow   = ids from Qwen2Tokenizer (in transformers >= 5 this may be
                           the same tokenizers-backed implementation; meta.json says)
                  decoded = fast.decode(fast ids) (skip_special_tokens=False)
                  pyslow = present only when it differs from "fast": the v4 slow
                           algorithm (NFC on the whole text, then added-token split,
                           regex, BPE) re-implemented below, as an independent check
  tokenizer.json  the fast tokenizer's serialized definition (save_pretrained)
  meta.json       versions, classes, special-token ids, disagreement lists

The test strings are generated deterministically (fixed seed, no clock).

Two further modes cross-check more text than the committed fixtures hold:

  --sweep DIR     (reference side, needs transformers) writes DIR/sweep.jsonl.gz:
                  the reference ids of two probe strings per code point of planes
                  0-3 and 14 (surrogates excluded), and, for every DIR-less corpus
                  file given with --corpus F.jsonl (one JSON string per line),
                  DIR/F.ids.jsonl.gz with the reference ids of each line
  --compare DIR   (our side) runs `h3 stage tokenize` (--h3 BINARY, --tok FOLDER)
                  on the same strings and reports every difference
  --sample-from DIR --sample FILE
                  writes FILE (strings.jsonl format, "cat": "sweep") with the
                  reference ids of a deterministic subset of DIR/sweep.jsonl.gz:
                  every 193rd code point plus SWEEP_KEEP (the code points where
                  Unicode-version differences between the reference and
                  PCRE2 / utf8proc showed up)
"""
import argparse
import json
import os
import random
import sys
import tempfile
import unicodedata

# --------------------------------------------------------------------------
# Test strings
# --------------------------------------------------------------------------

PROSE = [
    "Hello world",
    " Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "A cinematic shot of a red fox running through fresh snow at dawn, soft golden light.",
    "She said, \"It's not what you think!\" and left; nobody followed.",
    "In 1969, humans first walked on the Moon (Apollo 11).",
    "The camera slowly pans left, revealing a crowded market street in the rain.",
    "Mr. O'Neil's dog-walking business isn't doing well -- yet.",
    "e-mail: someone@example.com, web: https://example.org/path?q=1&r=2#frag",
    "Wait... what?! No way!!!",
    "Tabs\tand\tspaces  mixed   together.",
    "UPPERCASE WORDS AND lowercase words AND MiXeD CaSe.",
    "a cat <d> walking",
    "<Picture 1>: ",
    "<Picture 2>: ",
    "<Video 1>: ",
    "<Audio 1>: ",
    "<0.2 seconds>",
    "<1.0 seconds>",
    "<12.2 seconds>",
    "A man plays guitar on stage; the crowd sings along. [music] (applause)",
    "Close-up: water droplets fall from a leaf -- slow motion, 120 fps.",
    "It was the best of times, it was the worst of times.",
    "\"Quoted\" 'single' `backtick` \u201ccurly\u201d \u2018curly\u2019",
    "naïve café résumé coöperate façade jalapeño",
    "Straße Größe Übermaß ÄÖÜ äöü ß ẞ",
    "Ĳsselmeer ǅemal ﬁne ﬂow ﬀ",
]

WORDS = ("the of and to in is that it for on was with as by at from this be are an or "
         "video camera slowly moves toward a small wooden house near the river while birds "
         "fly overhead and the sun sets behind mountains light shadow woman man child dog cat "
         "running walking dancing singing close-up wide shot zoom pan tilt dramatic soft warm "
         "cold blue red green golden hour rain snow wind fire ocean waves city street night "
         "I'm you're we've they'll she'd it's don't can't won't isn't ISN'T WE'LL").split()

CODE = [
    "def f(x):\n    return x * 2\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (size_t i = 0; i < n; ++i) a[i] += b[i] << 2;",
    "{\"key\": [1, 2.5, -3e10, null, true], \"nested\": {\"a\": \"b\"}}",
    "if x != y && z >= 0 || !w { panic!(\"bad\"); }",
    "SELECT id, name FROM users WHERE age > 21 ORDER BY name DESC;",
    "#!/bin/bash\nset -euo pipefail\necho \"$HOME\" | tr a-z A-Z > /dev/null 2>&1\n",
    "    indented\n        more\n\t\ttabs\n",
    "x=1;y=2;z=x+y*3/4-5%6**7//8",
    "<div class=\"a\"><span>text</span></div>",
    "// comment\n/* block\n   comment */\n",
    "lambda *args, **kwargs: (args, kwargs)",
    "git commit -m 'fix: handle \\r\\n line endings'",
    "std::vector<std::pair<int, std::string>> v{{1, \"a\"}};",
    "```python\nprint('hi')\n```",
    "a->b.c[0]->d(e, f)?.g ?? h",
    "0x7fff_ffff 0b1010 1e-9 1_000_000 3.14159265358979",
]

NUMBERS = [
    "2025", "1234567890", "3.14159", "1,234,567.89", "-42", "+7", "1e10", "0.000001",
    "2024-05-17 13:45:00", "12:30pm", "$100.00", "50%", "#1", "v1.2.3",
    "\u0661\u0662\u0663 \u06f4\u06f5\u06f6",  # Arabic-Indic and extended digits
    "\uff11\uff12\uff13",  # full-width digits
    "x\u00b2 + y\u00b3 = z\u00b9",  # superscripts (No)
    "\u00bd \u00bc \u00be \u2153",  # vulgar fractions
    "\u2160 \u2161 \u216b \u2170",  # roman numerals (Nl)
    "\u2460\u2461\u2462 \u2474",  # circled numbers (No)
    "\u0967\u0968\u0969 \u0e51\u0e52",  # Devanagari, Thai digits
    "\u4e00\u4e8c\u4e09 \u96f6",  # CJK numerals are letters (Lo)
    "9" * 300,
    "3.1415926535897932384626433832795028841971693993751058209749445923",
]

WHITESPACE = [
    "", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", "\r", " \n", "\n ", " \n ",
    "a  b", "a   b", "a\n\nb", "a \n b", "a\t\tb", "a \t b", "  leading", "trailing  ",
    "line1\nline2\r\nline3\rline4", "x\n\n\n\ny", "  \n  \n  x", "word \n\n  next",
    "\u00a0nbsp\u00a0", "em\u2003space", "ideo\u3000space", "nel\u0085x", "mvs\u180ex",
    "zwsp\u200bx", "bom\ufeffx", "ls\u2028ps\u2029x", "fs\x1cgs\x1drs\x1eus\x1fx",
    "vt\x0bff\x0cx", "thin\u2009space\u202fnarrow\u205fmath", "ogham\u1680x",
    " " * 500, "\n" * 64, " \t" * 40 + "end", "a" + " " * 17 + "b", "\u3000\u3000x",
    "\u00a0\u00a0 x", "x \u00a0", "x\u2003 y",
]

CONTRACTIONS = [
    "don't", "I'm", "you're", "we've", "they'll", "she'd", "it's", "DON'T", "I'M", "WE'VE",
    "They'Ll", "it'S", "it'ſ", "ca'n't", "''s", "'s'", "o'clock", "rock'n'roll",
    "it\u2019s", "y'all", "'ll 'd 'm 're", "'LL'D'M", "x'", "'", "''", "'''",
    "won't've", "I'd've", "fo'c's'le",
]

CJK = [
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01",  # 你好，世界！
    "\u4e00\u53ea\u5c0f\u732b\u5728\u96ea\u5730\u91cc\u5954\u8dd1\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002",  # 日本語のテキストです。
    "\u30ab\u30bf\u30ab\u30ca \u3072\u3089\u304c\u306a \u6f22\u5b57",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4.",  # 한국어 텍스트입니다.
    "\u4e2d\u6587English\u6df7\u5408123\u6570\u5b57",
    "\u3010\u6807\u9898\u3011\u300c\u5f15\u7528\u300d\u300a\u4e66\u540d\u300b",
    "\U00020000\U00020001\U0002a700",  # CJK Ext B/C
    "\u9f98\u9750\u7e8d",
    "\uff21\uff22\uff23\uff41\uff42\uff43",  # full-width Latin
    "\uff08\u5168\u89d2\u62ec\u53f7\uff09",
    "\u6e05\u6668\u7684\u9633\u5149\u7167\u5728\u6e56\u9762\u4e0a\uff0c\u4e00\u53ea\u767d\u9e6d\u7f13\u7f13\u98de\u8fc7\u3002",
]

EMOJI = [
    "\U0001f600", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",
    "\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f8", "1\ufe0f\u20e3", "\u2764\ufe0f", "\u2764",
    "\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f9d1\u200d\U0001f4bb", "I \u2764\ufe0f NY \U0001f5fd!",
    "\U0001f525\U0001f525\U0001f525", "emoji\U0001f600inside\U0001f600words",
    "\U0001f3c3\u200d\u2640\ufe0f\u200d\u27a1\ufe0f", "\u00a9\u00ae\u2122", "\u2600\u2601\u2602",
    "\U0001faf6\U0001fae0\U0001f979",
]

COMBINING = [
    "e\u0301", "cafe\u0301", "A\u030a", "\u212b", "\u2126", "\u1100\u1161\u11a8",
    "n\u0303o\u0308", "\u1ec7 vi\u00ea\u0323t", "Vie\u0323\u0302t Nam", "a\u0300\u0301\u0302\u0303",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u0334\u0335\u031c\u0330\u0354L\u0348\u0348",
    "=\u0338", "<\u0338", ">\u0338", "x\u0338", "\u0915\u094d\u0937", "\u0e01\u0e33",
    "\u1e9b\u0323", "\u0041\u030a\u0301", "\u03a9\u0301", "\uac00\u11a8", "\u0ddd",
    "\u00c5", "A\u0308\uFB01", "\u0301start", " \u0301", "\u3099\u304b\u3099",
    "\u2000\u2001", "\u0344", "\u0958", "\u2329\u232a", "\uf900\ufa10",
    # 4-byte characters right before a mark newer than the reference's NFC tables
    # (h3 once clobbered such a mark: found by tests/fuzz/fuzz_tokenize)
    "\U0001f600\u1ac7", "\U0001d2c0\u1ac7ti www\u1ac7t", "\U0001f600\U0001f600\U00011938 x",
]

RTL = [
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",  # Arabic
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",  # Hebrew
    "\u0627\u0644\u0639\u062f\u062f 123 \u0648 \u0664\u0665\u0666",
    "\u200fRTL mark\u200e LTR mark",
    "\u0633\u0644\u0627\u0645 \u062f\u0646\u06cc\u0627",  # Persian
    "\u202bembedded\u202c \u202eoverride\u202c",
    "\u0628\u0650\u0633\u0652\u0645\u0650 \u0627\u0644\u0644\u0651\u064e\u0647\u0650",  # harakat
    "English \u05e2\u05d1\u05e8\u05d9\u05ea English",
]

SCRIPTS = [
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",  # Russian
    "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5",  # Greek
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",  # Hindi
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",  # Thai
    "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0",  # Georgian
    "\u0532\u0561\u0580\u0565\u0582",  # Armenian
    "\u1230\u120b\u121d",  # Ethiopic
    "\u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd",  # Tamil
    "Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u",
    "\u00e6\u00f8\u00e5 \u00c6\u00d8\u00c5 \u0142\u00f3d\u017a",
    "\u0130stanbul \u0131\u0130 i\u0307",
    "\u1f00\u1f01\u1f08 \u1fb3\u1fbc",
    "\U0001d400\U0001d401 \U0001d7ce\U0001d7cf",  # math alphanumerics (L / Nd)
    "\u02b0\u02b2 \u02c6\u02c7",  # modifier letters (Lm) and symbols (Sk)
    "\u3041\u309d\u30fc\u30fd",
]

CONTROL = [
    "\x00", "a\x00b", "\x01\x02\x03", "\x7f", "\x08\x1b[31mred\x1b[0m", "\x80\x9f",
    "\u00ad", "soft\u00adhyphen", "\ue000\uf8ff", "\U000f0000", "\U0010ffff", "\ufffd",
    "\ufffe\uffff", "\u0378\u0380", "\U000e0001\U000e0041", "\u2028", "\u061c", "\u200d",
]

# Characters assigned in Unicode 15.0 / 15.1 / 16.0: regex engines built with older
# Unicode tables classify them differently.  Kept in their own category.
UNICODE_NEW = [
    "\U00031350\U00031351",  # CJK Ext H (15.0, Lo)
    "\U0002ebf0\U0002ebf1",  # CJK Ext I (15.1, Lo)
    "\U00011f04\U00011f05",  # Kawi (15.0)
    "\U0001e030\U0001e031",  # Cyrillic modifier letters (15.0, Lm)
    "\U0001e4d0\U0001e4d1",  # Nag Mundari (15.0)
    "\U0001fae8\U0001fa77",  # emoji 15.0
    "a\U00031350b 1\U0001e4f0",
    "\U000105c0\U000105c1",  # Todhri (16.0)
    "\U00016d40\U00016d41",  # Kirat Rai (16.0)
    "\U0001ccf0\U0001ccf1",  # segmented digits (16.0)
]

SPECIAL = [
    "<|im_start|>user\nDescribe the video.<|im_end|>\n<|im_start|>assistant\n",
    "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>",
    "<|vision_start|><|video_pad|><|vision_end|>",
    "<Picture 1>: <|vision_start|><|image_pad|><|vision_end|>A dog.",
    "<d>dialogue</d>", "<d> spaced </d>", "a<d>b</d>c", "<d><d></d></d>",
    "<|cutoff|>", "<|lyrics_start|>la la<|lyrics_end|>", "<|caption_start|>cap<|caption_end|>",
    "<think>\n\n</think>\n\n", "<tool_call>{}</tool_call>", "<tool_response>x</tool_response>",
    "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>", "<|repo_name|>r<|file_sep|>f",
    "<|endoftext|>", "<|endoftext|><|endoftext|>", " <|endoftext|> ",
    "<|im_start", "<|im_start|", "im_start|>", "<|IM_START|>", "<| im_start |>",
    "<<|im_end|>>", "<|<|im_end|>|>", "<|im_start|><|im_end|>",
    "<|im_start|>\u0338", "<d>\u0338", "<|vision_end|>\u0301x", "e<d>\u0301",
    "<|object_ref_start|>obj<|object_ref_end|><|box_start|>(1,2)<|box_end|>",
    "<|quad_start|>q<|quad_end|><|vision_pad|>",
    "text <|im_end|>text", "\n<|im_end|>\n", "  <d>  ", "<D>", "</d", "d>",
    "<tool_call></tool_call>", "<|fim_pad|>", "<|box_start|>", "</think>",
]

SPECIAL_TOKENS_ALL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>",
    "</think>", "<d>", "</d>", "<|cutoff|>", "<|lyrics_start|>", "<|lyrics_end|>",
    "<|caption_start|>", "<|caption_end|>",
]

LONG = [
    "a" * 1000,
    "ab" * 700,
    "!" * 400,
    "-" * 300 + ">",
    "\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341" * 200,
    "\U0001f600" * 200,
    "supercalifragilisticexpialidocious" * 30,
    ("The camera follows a cyclist through narrow streets. " * 40).strip(),
    "=" * 1000 + "\n" + "-" * 1000,
    "\u00e9" * 500,
    "\u0301" * 100,
]


def gen_mixed(rng, n):
    pools = [PROSE, CODE, NUMBERS[:-2], WHITESPACE[:-9], CONTRACTIONS, CJK, EMOJI, COMBINING,
             RTL, SCRIPTS, SPECIAL, SPECIAL_TOKENS_ALL, CONTROL]
    seps = ["", " ", "  ", "\n", "\t", "\r\n", ", ", ". ", "'", "\u00a0", "\u3000", "-"]
    out = []
    for _ in range(n):
        k = rng.randint(2, 6)
        parts = []
        for _ in range(k):
            pool = rng.choice(pools)
            frag = rng.choice(pool)
            if len(frag) > 40 and rng.random() < 0.5:
                a = rng.randrange(len(frag))
                frag = frag[a:a + rng.randint(1, 40)]
            parts.append(frag)
            parts.append(rng.choice(seps))
        out.append("".join(parts))
    return out


def gen_words(rng, n):
    out = []
    for _ in range(n):
        k = rng.randint(1, 25)
        ws = []
        for _ in range(k):
            w = rng.choice(WORDS)
            r = rng.random()
            if r < 0.1:
                w = w.capitalize()
            elif r < 0.15:
                w = w.upper()
            ws.append(w)
            ws.append(rng.choice([" ", " ", " ", " ", ", ", ". ", "  ", "\n", " -- ", "; "]))
        out.append("".join(ws).rstrip(" ") + rng.choice(["", ".", "!", "?", "\n", " "]))
    return out


def gen_numbers(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.3:
            s = str(rng.randint(0, 10 ** rng.randint(1, 30)))
        elif r < 0.5:
            s = "%.*f" % (rng.randint(0, 8), rng.uniform(-1e6, 1e6))
        elif r < 0.7:
            s = "<%.1f seconds>" % (rng.randint(0, 200) / 2 + 0.25)
        elif r < 0.85:
            s = "<%s %d>: " % (rng.choice(["Picture", "Video", "Audio"]), rng.randint(1, 12))
        else:
            s = "".join(rng.choice("0123456789 .,-+e") for _ in range(rng.randint(1, 40)))
        out.append(s)
    return out


def gen_random_unicode(rng, n):
    # random code points from assorted blocks (no surrogates), incl. combining marks
    ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff),
              (0x590, 0x5ff), (0x600, 0x6ff), (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff),
              (0x1e00, 0x1eff), (0x2000, 0x206f), (0x2100, 0x22ff), (0x3000, 0x30ff),
              (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xff00, 0xffef), (0x1f300, 0x1f64f),
              (0x1f900, 0x1f9ff), (0x9, 0xd)]
    out = []
    for _ in range(n):
        k = rng.randint(1, 30)
        cs = []
        for _ in range(k):
            a, b = rng.choice(ranges)
            cs.append(chr(rng.randint(a, b)))
        out.append("".join(cs))
    return out


def build_strings():
    rng = random.Random(20250517)
    items = []

    def add(cat, lst):
        for s in lst:
            items.append((cat, s))

    add("prose", PROSE)
    add("code", CODE)
    add("numbers", NUMBERS)
    add("whitespace", WHITESPACE)
    add("contractions", CONTRACTIONS)
    add("cjk", CJK)
    add("emoji", EMOJI)
    add("combining", COMBINING)
    add("rtl", RTL)
    add("scripts", SCRIPTS)
    add("control", CONTROL)
    add("special", SPECIAL)
    add("special_each", SPECIAL_TOKENS_ALL)
    add("special_each", [" " + t + " " for t in SPECIAL_TOKENS_ALL])
    add("long", LONG)
    add("unicode_new", UNICODE_NEW)
    # each combining string also in NFD / NFKC-irrelevant forms: NFD input must NFC back
    add("nfd", [unicodedata.normalize("NFD", s) for s in PROSE[-3:] + SCRIPTS + CJK[:5]])
    add("words", gen_words(rng, 250))
    add("numbers_gen", gen_numbers(rng, 150))
    add("unicode_random", gen_random_unicode(rng, 150))
    add("mixed", gen_mixed(rng, 300))
    return items


# --------------------------------------------------------------------------
# Independent re-implementation of the v4 slow algorithm (check only)
# --------------------------------------------------------------------------

PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
       r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def byte_table():
    keep = list(range(0x21, 0x7f)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


class PySlow:
    def __init__(self, folder, added):
        import regex
        self.re = regex.compile(PAT)
        with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)
        self.ranks = {}
        with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
            r = 0
            for ln, line in enumerate(f):
                line = line.rstrip("\n")
                if ln == 0 and line.startswith("#version"):
                    continue
                if not line.strip():
                    continue
                a, b = line.split(" ")
                self.ranks[(a, b)] = r
                r += 1
        self.bt = byte_table()
        self.added = added  # content -> id
        self.cache = {}

    def bpe(self, piece):
        if piece in self.cache:
            return self.cache[piece]
        word = list(piece)
        while len(word) > 1:
            best = None
            for i in range(len(word) - 1):
                r = self.ranks.get((word[i], word[i + 1]))
                if r is not None and (best is None or r < best):
                    best = r
            if best is None:
                break
            out = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and self.ranks.get((word[i], word[i + 1])) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        ids = [self.vocab[w] for w in word]
        self.cache[piece] = ids
        return ids

    def encode(self, text):
        text = unicodedata.normalize("NFC", text)
        toks = sorted(self.added, key=len, reverse=True)
        ids = []
        pos = 0
        seg_start = 0
        while pos <= len(text):
            hit = None
            if pos < len(text):
                for t in toks:
                    if text.startswith(t, pos):
                        hit = t
                        break
            if hit is None and pos < len(text):
                pos += 1
                continue
            for p in self.re.findall(text[seg_start:pos]):
                ids.extend(self.bpe("".join(self.bt[b] for b in p.encode("utf-8"))))
            if hit is None:
                break
            ids.append(self.added[hit])
            pos += len(hit)
            seg_start = pos
        return ids


# --------------------------------------------------------------------------


def sweep_strings():
    """Two probe strings per code point: letter / number / space / newline
    contexts, and combining-mark contexts for NFC."""
    cps = [c for c in range(0x40000) if not 0xD800 <= c <= 0xDFFF] + list(range(0xE0000, 0xE1000))
    out = []
    for c in cps:
        ch = chr(c)
        out.append("a%sb %s1%s %s%s\t%s\n%s" % (ch, ch, ch, ch, ch, ch, ch))
        out.append("e%s\u0301%s\u0327o" % (ch, ch))
    return cps, out


# Code points where a first comparison differed (Kaktovik numerals: \p{N} since
# Unicode 15.0; the rest: combining marks newer than the reference's NFC tables).
SWEEP_KEEP = [(0x7FD, 0x7FD), (0x898, 0x89F), (0x8CA, 0x8D3), (0x9FE, 0x9FE), (0xC3C, 0xC3C), (0xD3B, 0xD3C),
              (0xEBA, 0xEBA), (0x1715, 0x1715), (0x1ABF, 0x1ACE), (0x1DF6, 0x1DFA), (0xA82C, 0xA82C),
              (0x10D24, 0x10D27), (0x10EAB, 0x10EAC), (0x10EFD, 0x10EFF), (0x10F46, 0x10F50), (0x10F82, 0x10F85),
              (0x11070, 0x11070), (0x1133B, 0x1133B), (0x1145E, 0x1145E), (0x11839, 0x1183A), (0x11930, 0x11938),
              (0x1193D, 0x1193E), (0x11943, 0x11943), (0x119E0, 0x119E0), (0x11A34, 0x11A34), (0x11A47, 0x11A47),
              (0x11A99, 0x11A99), (0x11D42, 0x11D42), (0x11D44, 0x11D45), (0x11D97, 0x11D97), (0x11F41, 0x11F42),
              (0x16FF0, 0x16FF1), (0x1D2C0, 0x1D2D3), (0x1E08F, 0x1E08F), (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE),
              (0x1E2EC, 0x1E2EF), (0x1E4EC, 0x1E4EF)]


def do_sample(args):
    import gzip
    cps, strings = sweep_strings()
    with gzip.open(os.path.join(args.sample_from, "sweep.jsonl.gz"), "rt", encoding="ascii") as f:
        want = f.read().splitlines()
    keep = set()
    for a, b in SWEEP_KEEP:
        keep.update(range(a, b + 1))
    n = 0
    with open(args.sample, "w", encoding="utf-8") as f:
        for k, c in enumerate(cps):
            if k % 193 and c not in keep:
                continue
            for probe in (0, 1):
                i = 2 * k + probe
                f.write(json.dumps({"i": i, "cat": "sweep", "cp": c, "text": strings[i],
                                    "fast": json.loads(want[i])}, ensure_ascii=True) + "\n")
                n += 1
    print("sample: %d strings -> %s" % (n, args.sample))


def do_sweep(args):
    import gzip
    from transformers import AutoTokenizer
    fast = AutoTokenizer.from_pretrained(args.tok)
    bt = fast.backend_tokenizer
    os.makedirs(args.sweep, exist_ok=True)
    _, strings = sweep_strings()
    encs = bt.encode_batch(strings, add_special_tokens=False)
    with gzip.open(os.path.join(args.sweep, "sweep.jsonl.gz"), "wt", encoding="ascii", compresslevel=9) as f:
        for e in encs:
            f.write(json.dumps(e.ids, separators=(",", ":")) + "\n")
    print("sweep: %d strings" % len(strings))
    for path in args.corpus or []:
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(l) for l in f]
        encs = bt.encode_batch(lines, add_special_tokens=False)
        name = os.path.basename(path).replace(".jsonl", "") + ".ids.jsonl.gz"
        with gzip.open(os.path.join(args.sweep, name), "wt", encoding="ascii", compresslevel=9) as f:
            for e in encs:
                f.write(json.dumps(e.ids, separators=(",", ":")) + "\n")
        print("corpus %s: %d lines, %d ids" % (path, len(lines), sum(len(e.ids) for e in encs)))


def do_compare(args):
    import gzip
    import subprocess
    def run_h3(lines_json):
        p = subprocess.run([args.h3, "stage", "tokenize", "--model", args.tok], input=lines_json.encode("ascii"),
                           stdout=subprocess.PIPE, check=True)
        return p.stdout.decode("ascii").splitlines()
    cps, strings = sweep_strings()
    got = run_h3("".join(json.dumps(s) + "\n" for s in strings))
    with gzip.open(os.path.join(args.compare, "sweep.jsonl.gz"), "rt", encoding="ascii") as f:
        want = f.read().splitlines()
    assert len(got) == len(want) == len(strings), (len(got), len(want), len(strings))
    bad = [i for i in range(len(strings)) if got[i] != want[i]]
    print("sweep: %d strings (%d code points), %d differ" % (len(strings), len(cps), len(bad)))
    for i in bad[:60]:
        c = cps[i // 2]
        print("  U+%04X %s %s probe %d: ours %s ref %s" % (c, unicodedata.category(chr(c)),
              unicodedata.name(chr(c), "?"), i % 2, got[i][:80], want[i][:80]))
    for path in args.corpus or []:
        name = os.path.basename(path).replace(".jsonl", "") + ".ids.jsonl.gz"
        with open(path, encoding="utf-8") as f:
            text = f.read()
        got = run_h3(text)
        with gzip.open(os.path.join(args.compare, name), "rt", encoding="ascii") as f:
            want = f.read().splitlines()
        nb = sum(1 for a, b in zip(got, want) if a != b) + abs(len(got) - len(want))
        print("corpus %s: %d lines, %d differ" % (path, len(want), nb))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tok")
    ap.add_argument("--out")
    ap.add_argument("--sweep")
    ap.add_argument("--compare")
    ap.add_argument("--corpus", action="append")
    ap.add_argument("--h3")
    ap.add_argument("--sample")
    ap.add_argument("--sample-from")
    args = ap.parse_args()
    if args.sample and args.sample_from:
        do_sample(args)
    if args.sweep:
        do_sweep(args)
    if args.compare:
        do_compare(args)
    if not args.out:
        return
    os.makedirs(args.out, exist_ok=True)

    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    meta = {
        "python": sys.version,
        "unicodedata": unicodedata.unidata_version,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "tok_folder_files": sorted(os.listdir(args.tok)),
        "notes": [],
    }
    try:
        import regex
        meta["regex"] = getattr(regex, "__version__", "?")
    except Exception as e:  # noqa: BLE001
        meta["regex"] = "unavailable: %r" % (e,)

    Slow = getattr(transformers, "Qwen2Tokenizer")
    Fast = getattr(transformers, "Qwen2TokenizerFast", None)
    slow = Slow.from_pretrained(args.tok)
    if Fast is None:
        meta["notes"].append("transformers has no Qwen2TokenizerFast; fast = AutoTokenizer")
        fast = AutoTokenizer.from_pretrained(args.tok)
    else:
        fast = Fast.from_pretrained(args.tok)
    auto = AutoTokenizer.from_pretrained(args.tok)
    meta["classes"] = {
        "slow": "%s.%s (mro: %s)" % (type(slow).__module__, type(slow).__name__,
                                     [c.__name__ for c in type(slow).__mro__[:5]]),
        "fast": "%s.%s (mro: %s)" % (type(fast).__module__, type(fast).__name__,
                                     [c.__name__ for c in type(fast).__mro__[:5]]),
        "auto": type(auto).__name__,
        "slow_is_fast_class": type(slow) is type(fast),
        "slow_is_fast_backend": bool(getattr(slow, "is_fast", False)),
    }
    meta["len"] = {"slow": len(slow), "fast": len(fast)}
    meta["vocab_size"] = {"slow": slow.vocab_size, "fast": fast.vocab_size}
    meta["token_ids"] = {t: [slow.convert_tokens_to_ids(t), fast.convert_tokens_to_ids(t)]
                         for t in SPECIAL_TOKENS_ALL + ["Ġ", "Ċ", "hello", "Hello", "ĠHello",
                                                        "<|not_a_token|>"]}
    if hasattr(fast, "backend_tokenizer"):
        bt = fast.backend_tokenizer
        meta["backend"] = {"normalizer": repr(bt.normalizer),
                           "pre_tokenizer": repr(bt.pre_tokenizer),
                           "decoder": repr(bt.decoder),
                           "post_processor": repr(bt.post_processor)}

    # tokenizer.json as saved by the fast tokenizer
    with tempfile.TemporaryDirectory() as td:
        fast.save_pretrained(td)
        meta["saved_files"] = sorted(os.listdir(td))
        tj = os.path.join(td, "tokenizer.json")
        with open(tj, "rb") as f:
            tj_bytes = f.read()
        with open(os.path.join(args.out, "tokenizer.json"), "wb") as f:
            f.write(tj_bytes)
        reloaded = tokenizers.Tokenizer.from_file(tj)
        with open(os.path.join(td, "tokenizer_config.json"), encoding="utf-8") as f:
            meta["saved_tokenizer_config_keys"] = sorted(json.load(f).keys())

    added = {}
    for t in SPECIAL_TOKENS_ALL:
        added[t] = fast.convert_tokens_to_ids(t)
    try:
        pyslow = PySlow(args.tok, added)
    except Exception as e:  # noqa: BLE001
        pyslow = None
        meta["notes"].append("pyslow unavailable: %r" % (e,))

    items = build_strings()
    dis_slow, dis_py, dis_reload, dis_decode = [], [], [], []
    with open(os.path.join(args.out, "strings.jsonl"), "w", encoding="utf-8") as f:
        for i, (cat, s) in enumerate(items):
            fi = fast.encode(s, add_special_tokens=False)
            si = slow.encode(s, add_special_tokens=False)
            ri = reloaded.encode(s, add_special_tokens=False).ids
            dec = fast.decode(fi, skip_special_tokens=False)
            rec = {"i": i, "cat": cat, "text": s, "fast": fi, "slow": si, "decoded": dec}
            if si != fi:
                dis_slow.append(i)
            if ri != fi:
                dis_reload.append(i)
            if dec != unicodedata.normalize("NFC", s):
                dis_decode.append(i)
            if pyslow is not None:
                try:
                    pi = pyslow.encode(s)
                except Exception as e:  # noqa: BLE001
                    pi = "error: %r" % (e,)
                if pi != fi:
                    rec["pyslow"] = pi
                    dis_py.append(i)
            f.write(json.dumps(rec, ensure_ascii=True) + "\n")
    meta["count"] = len(items)
    meta["categories"] = sorted(set(c for c, _ in items))
    meta["disagree_slow_vs_fast"] = dis_slow
    meta["disagree_pyslow_vs_fast"] = dis_py
    meta["disagree_tokenizer_json_reload_vs_fast"] = dis_reload
    meta["decode_not_nfc_of_input"] = dis_decode
    with open(os.path.join(args.out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, ensure_ascii=True)
    print(json.dumps({k: v for k, v in meta.items() if k != "token_ids"}, indent=1)[:6000])
    print("disagreements: slow %d, pyslow %d, reload %d, decode %d" %
          (len(dis_slow), len(dis_py), len(dis_reload), len(dis_decode)))
    for i in dis_py[:40]:
        print("pyslow differs:", i, items[i][0], ascii(items[i][1])[:80])


if __name__ == "__main__":
    main()
