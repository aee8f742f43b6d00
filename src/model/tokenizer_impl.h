/* Internals of the byte-level BPE tokenizer, shared by tokenizer.c (encode,
 * decode, tables) and tokenizer_load.c (file parsing).  Not a public header. */
#ifndef H3_MODEL_TOKENIZER_IMPL_H
#define H3_MODEL_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>

#include "model/tokenizer.h"

/* Ids are below 2^24: the id table is dense (one tk_token per id up to the
 * highest), so a larger id would make a few-byte file allocate gigabytes.
 * Real vocabularies stop near 2^18 (151,676 ids for MiniMax-H3). */
#define TK_MAX_ID (1 << 24)

/* One id.  Bytes (what decoding produces) live in tk->blob at off..off+len. */
typedef struct tk_token {
  uint32_t off, len;
  uint8_t kind;    /* TK_NONE / TK_VOCAB / TK_ADDED */
  uint8_t special; /* added token flagged special */
  uint8_t odd;     /* vocab string not in the byte-level alphabet: bytes are its raw UTF-8 */
} tk_token;

enum { TK_NONE = 0, TK_VOCAB = 1, TK_ADDED = 2 };

typedef struct tk_added {
  char *content; /* UTF-8, NUL-terminated */
  size_t len;
  int32_t id;
  bool special, normalized;
} tk_added;

/* Open-addressing map from byte strings to ids (keys are the tokens' bytes). */
typedef struct tk_strmap {
  uint32_t *hash; /* 0 = empty slot (hashes are forced non-zero) */
  int32_t *val;
  size_t cap, count; /* cap: power of two */
} tk_strmap;

/* Merge table: (left id, right id) -> (rank, merged id). */
typedef struct tk_pairslot {
  uint64_t key; /* UINT64_MAX = empty */
  int32_t rank, id;
} tk_pairslot;
typedef struct tk_pairmap {
  tk_pairslot *slot;
  size_t cap, count;
} tk_pairmap;

/* Piece cache: piece bytes -> id list. */
typedef struct tk_centry {
  uint32_t koff, klen, voff, vlen;
} tk_centry;
typedef struct tk_cache {
  uint32_t *hash; /* 0 empty */
  uint32_t *entry;
  size_t cap;
  tk_centry *ent;
  size_t nent, capent;
  uint8_t *keys;
  size_t nkeys, capkeys;
  int32_t *vals;
  size_t nvals, capvals;
} tk_cache;

struct h3_tokenizer {
  char *source;       /* file the vocabulary came from */
  tk_token *tok;      /* by id, n_ids entries */
  size_t n_ids, tok_cap;
  uint8_t *blob;
  size_t blob_len, blob_cap;
  tk_strmap vocab;    /* bytes -> id, byte-level vocab entries only */
  tk_pairmap merges;
  int32_t byte_id[256];
  tk_added *added;
  size_t n_added, cap_added;
  uint8_t first_raw[256], first_norm[256]; /* first bytes of added tokens per group */
  bool has_norm_added;
  bool nfc;
  bool ignore_merges;
  int64_t model_max_length; /* tokenizer_config.json; INT64_MAX when absent */
  pcre2_code *re;
  pcre2_match_data *md;
  /* mutable state, under `lock` */
  pthread_mutex_t lock;
  tk_cache cache;
  bool warned_long; /* the over-long warning was given (once, as the reference) */
  int32_t *wsym, *wprev, *wnext, *wrank;
  uint64_t *wheap;
  size_t wcap, hcap;
};

/* Qwen2's pre-tokenization pattern (also the default for vocab.json + merges.txt). */
extern const char tk_qwen2_pattern[];
/* GPT-2's pattern (ByteLevel pre-tokenizer with use_regex = true). */
extern const char tk_gpt2_pattern[];

/* byte -> code point of the byte-level alphabet, and the inverse (-1 = not in it). */
uint32_t tk_byte_to_cp(uint8_t b);
int tk_cp_to_byte(uint32_t cp);

/* Convert a byte-level alphabet string to raw bytes (into buf, which must hold
 * len bytes).  Returns the byte count, or -1 when a character is outside the
 * alphabet or the string is not valid UTF-8. */
long tk_alphabet_to_bytes(const char *s, size_t len, uint8_t *buf);

/* One vocabulary entry: a byte-level alphabet string and its id. */
typedef struct tk_vocab_entry {
  const char *key;
  size_t klen;
  int64_t id;
} tk_vocab_entry;
/* vocab.json's common form read fast (tokenizer_vocab_scan.c): 1 with the
 * entries (malloc'd; keys decoded in place inside `text`, which must stay
 * alive), 0 when the text is not that simple form (parse it with jansson). */
int tk_vocab_scan(char *text, size_t len, tk_vocab_entry **out, size_t *n);

/* Length of the longest valid UTF-8 prefix; equals len when all valid. */
size_t tk_utf8_valid_prefix(const uint8_t *s, size_t len);

/* Table building (tokenizer.c). */
h3_status tk_init(h3_tokenizer *t);
/* Set id's bytes.  Grows the id table. */
h3_status tk_set_token(h3_tokenizer *t, int32_t id, const uint8_t *bytes, size_t len, int kind,
                       bool odd, bool special);
int32_t tk_vocab_find(const h3_tokenizer *t, const uint8_t *bytes, size_t len);
h3_status tk_vocab_insert(h3_tokenizer *t, int32_t id);
h3_status tk_merge_add(h3_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t merged);
h3_status tk_added_add(h3_tokenizer *t, const char *content, size_t len, int32_t id, bool special,
                       bool normalized);
const tk_added *tk_added_find(const h3_tokenizer *t, const char *content, size_t len);
/* Compile the Split pattern (Oniguruma syntax as in tokenizer.json); `file`
 * names the file for errors. */
h3_status tk_set_pattern(h3_tokenizer *t, const char *pattern, const char *file);
/* Final checks and derived tables after loading. */
h3_status tk_finish(h3_tokenizer *t, const char *file);

#endif
