/* References handed in as decoded media (h3_media of the public API) rather
 * than files: the checks a decoded file would have passed, and the content
 * digest the engine's reference cache keys them on. */
#ifndef H3_ENGINE_REF_MEDIA_H
#define H3_ENGINE_REF_MEDIA_H

#include <stdint.h>

#include "core/error.h"
#include "h3/h3.h"

/* The fields a reference of this type needs, and their ranges: an image one
 * frame of RGB, a video frames and a positive finite fps, an audio clip
 * samples at a positive rate (and no frames); a soundtrack, where given, the
 * same as a clip.  `label` starts the one-line error (H3_ERR_INVALID). */
h3_status h3_ref_media_check(const h3_media *m, h3_ref_type type, const char *label);

/* SHA-256 over the fields and the bytes a reference of this type reads (a
 * silent video's soundtrack is not part of it). */
h3_status h3_ref_media_digest(const h3_media *m, h3_ref_type type, uint8_t digest[32]);

/* The bytes of m's frames: n_frames * height * width * 3. */
size_t h3_ref_media_rgb_bytes(const h3_media *m);

#endif
