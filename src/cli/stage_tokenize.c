/* h3 stage tokenize: prompt text -> Qwen2 token ids (docs/STAGES.md).
 * Input: one JSON string per line; output: one JSON array of ids per line. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "model/tokenizer.h"

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 stage tokenize --model PATH [--in FILE] [--out FILE]\n\n"
          "Tokenize prompts as the MiniMax-H3 text encoder does (Qwen2 byte-level BPE,\n"
          "no special tokens added).  Each input line is one JSON-encoded string; each\n"
          "output line is the JSON array of its token ids.\n\n"
          "options:\n"
          "  --model PATH   snapshot root, component folder or tokenizer folder\n"
          "                 (searched: tokenizer/, text_encoder/, processor/, PATH, ../tokenizer)\n"
          "  --in FILE      input lines (default: standard input)\n"
          "  --out FILE     output lines (default: standard output)\n"
          "  -v, -q         more / less logging (-v: load time and throughput on stderr)\n");
}

/* Append the decimal ids as a JSON array and a newline. */
static int write_ids(FILE *out, const int32_t *ids, size_t n, char **buf, size_t *cap) {
  size_t need = n * 12 + 4;
  if (need > *cap) {
    char *b = realloc(*buf, need);
    if (!b) return -1;
    *buf = b;
    *cap = need;
  }
  char *p = *buf;
  *p++ = '[';
  for (size_t i = 0; i < n; i++) {
    if (i) *p++ = ',';
    uint32_t v = (uint32_t)ids[i]; /* ids are >= 0 */
    char tmp[12];
    int k = 0;
    do {
      tmp[k++] = (char)('0' + v % 10);
      v /= 10;
    } while (v);
    while (k) *p++ = tmp[--k];
  }
  *p++ = ']';
  *p++ = '\n';
  return fwrite(*buf, 1, (size_t)(p - *buf), out) == (size_t)(p - *buf) ? 0 : -1;
}

int h3_stage_tokenize(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *model = NULL, *inp = NULL, *outp = NULL, *verbose = NULL, *quiet = NULL;
  const h3_opt opts[] = {
      {"--model", "-m", true, &model}, {"--in", NULL, true, &inp},         {"--out", "-o", true, &outp},
      {"--verbose", "-v", false, &verbose}, {"--quiet", "-q", false, &quiet},
  };
  int rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
  if (rc) return rc;
  if (!model) return h3_cli_usage_error("h3 stage tokenize needs --model");
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);

  const char *in_name = inp && strcmp(inp, "-") ? inp : "<stdin>";
  const char *out_name = outp && strcmp(outp, "-") ? outp : "<stdout>";
  int ret = 1;
  char *folder = NULL, *line = NULL, *obuf = NULL;
  size_t lcap = 0, ocap = 0;
  h3_tokenizer *tok = NULL;
  FILE *in = stdin, *out = stdout;
  double t0 = h3_now_s();
  if (h3_tokenizer_locate(model, &folder) != H3_OK) goto done;
  if (h3_tokenizer_load(folder, &tok) != H3_OK) goto done;
  H3_LOGD("tokenizer: %s (%zu ids), loaded in %.3f s", h3_tokenizer_source(tok), h3_tokenizer_vocab_size(tok),
          h3_now_s() - t0);
  if (inp && strcmp(inp, "-") && !(in = fopen(inp, "rb"))) {
    h3_fail(H3_ERR_IO, "%s: cannot open for reading", inp);
    in = NULL;
    goto done;
  }
  if (outp && strcmp(outp, "-") && !(out = fopen(outp, "wb"))) {
    h3_fail(H3_ERR_IO, "%s: cannot open for writing", outp);
    out = NULL;
    goto done;
  }
  /* Flush per line when the input is interactive (a pipe or terminal), so a
   * driving process can read each answer before sending the next line. */
  struct stat st;
  int flush_each = fstat(fileno(in), &st) != 0 || !S_ISREG(st.st_mode);
  size_t lineno = 0, text_bytes = 0, n_ids = 0;
  ssize_t got;
  double t1 = h3_now_s(), c1 = cpu_s();
  while ((got = getline(&line, &lcap, in)) >= 0) {
    lineno++;
    json_error_t e;
    json_t *j = json_loadb(line, (size_t)got, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!j || !json_is_string(j)) {
      if (j) json_decref(j);
      h3_fail(H3_ERR_FORMAT, "%s: line %zu: expected one JSON string per line%s%s", in_name, lineno,
              j ? "" : ": ", j ? "" : e.text);
      goto done;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    text_bytes += json_string_length(j);
    h3_status s = h3_tokenize(tok, json_string_value(j), json_string_length(j), &ids, &n);
    n_ids += n;
    json_decref(j);
    if (s != H3_OK) {
      h3_error_prefix("%s: line %zu", in_name, lineno);
      goto done;
    }
    int w = write_ids(out, ids, n, &obuf, &ocap);
    h3_tokens_free(ids);
    if (w || (flush_each && fflush(out))) {
      h3_fail(H3_ERR_IO, "%s: write failed", out_name);
      goto done;
    }
  }
  if (ferror(in)) {
    h3_fail(H3_ERR_IO, "%s: read error", in_name);
    goto done;
  }
  if (fflush(out)) {
    h3_fail(H3_ERR_IO, "%s: write failed", out_name);
    goto done;
  }
  double dt = h3_now_s() - t1, dc = cpu_s() - c1;
  H3_LOGD("tokenized %zu lines, %zu text bytes -> %zu ids in %.3f s wall (%.2f MB/s), %.3f s CPU (%.2f MB/s)",
          lineno, text_bytes, n_ids, dt, dt > 0 ? (double)text_bytes / 1048576.0 / dt : 0.0, dc,
          dc > 0 ? (double)text_bytes / 1048576.0 / dc : 0.0);
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  if (in && in != stdin) fclose(in);
  if (out && out != stdout && fclose(out) && !ret) {
    h3_fail(H3_ERR_IO, "%s: write failed", out_name);
    ret = h3_cli_fail(NULL);
  }
  free(line);
  free(obuf);
  free(folder);
  h3_tokenizer_free(tok);
  return ret;
}
