/* Where a request's LoRA is read from, and which LoRA names a network client
 * may give.  A name without a '/' is a file of the request's lora_dir when
 * one is set (h3 serve --lora-dir: clients name LoRAs only this way), else a
 * path as given. */
#ifndef H3_ENGINE_LORA_PATH_H
#define H3_ENGINE_LORA_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "h3/h3.h"

/* The first len bytes of name are a bare file name: letters, digits, '.', '_', '-'; not starting with '.';
 * no ".."; 1 to 200 bytes. */
bool h3_lora_name_ok(const char *name, size_t len);

/* The file LoRA `name` is read from, into out; H3_ERR_NOT_FOUND when it is not there (the message names the
 * LoRA as given and says "in the LoRA folder", not the folder's path). */
h3_status h3_lora_resolve(const char *lora_dir, const char *name, char *out, size_t cap);

#endif
