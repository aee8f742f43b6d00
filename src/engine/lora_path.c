/* LoRA names and the files they mean (lora_path.h). */
#include "engine/lora_path.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"

bool h3_lora_name_ok(const char *name, size_t len) {
  if (!name || !len || len > 200 || name[0] == '.') return false;
  for (size_t i = 0; i < len; i++) {
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
    if (c == '.' && i + 1 < len && name[i + 1] == '.') return false;
  }
  return true;
}

h3_status h3_lora_resolve(const char *lora_dir, const char *name, char *out, size_t cap) {
  if (!name || !*name) return h3_fail(H3_ERR_INVALID, "--lora: an empty name");
  const bool in_dir = lora_dir && *lora_dir && !strchr(name, '/');
  int n = in_dir ? snprintf(out, cap, "%s/%s", lora_dir, name) : snprintf(out, cap, "%s", name);
  if (n < 0 || (size_t)n >= cap) return h3_fail(H3_ERR_INVALID, "--lora %.200s: the path is too long", name);
  struct stat st;
  if (stat(out, &st) != 0) {
    if (in_dir) return h3_fail(H3_ERR_NOT_FOUND, "--lora %s: no such file in the LoRA folder", name);
    return h3_fail(H3_ERR_NOT_FOUND, "--lora %s: no such file%s", name,
                   strchr(name, ':') ? " (a strength after the last ':' must be a number)" : "");
  }
  if (!S_ISREG(st.st_mode)) return h3_fail(H3_ERR_INVALID, "--lora %s: not a file", name);
  return H3_OK;
}
