/* EXIF orientation as diffusers' load_image applies it (PIL
 * ImageOps.exif_transpose before convert("RGB")): where the value comes from
 * and the eight transpositions.
 *
 * Image.getexif(): the EXIF block (JPEG APP1 "Exif\0\0", PNG eXIf or tEXt
 * "exif" or "Raw profile type exif", WebP EXIF chunk), any "Exif\0\0"
 * prefixes stripped, parsed as TIFF: the first value of tag 0x0112 in IFD0
 * (PIL keeps the first value of this one-value tag whatever the count) when
 * it is of a numeric type and equals an integer (IFDRational and float values
 * match PIL's dict lookup too; BYTE values stay bytes and never match).  When
 * that tag is absent, the first `tiff:Orientation(="|>)([0-9])` in the XMP
 * packet.  Values 2..8 transpose;
 * anything else leaves the image as it is.  A block that is not a TIFF
 * structure makes PIL raise; so does this. */
#ifndef H3_MEDIA_IMAGE_ORIENT_H
#define H3_MEDIA_IMAGE_ORIENT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Orientation from an EXIF block (may start with "Exif\0\0"): *found = 1 and
 * *value set when IFD0 has a usable tag 0x0112.  Fails (H3_ERR_FORMAT) when
 * the block is not TIFF. */
h3_status h3_exif_orientation(const uint8_t *exif, size_t n, const char *name, int *found, int *value);

/* Orientation digit from an XMP packet (0 = none). */
int h3_xmp_orientation(const uint8_t *xmp, size_t n);

/* Apply orientation o (1..8) to an RGB8 image: *rgb is replaced (realloc'd
 * copy), *w / *h swapped for 5..8. */
h3_status h3_image_apply_orientation(uint8_t **rgb, int *w, int *h, int o);

#endif
