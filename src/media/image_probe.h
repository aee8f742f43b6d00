/* Container-level facts of an image file, read the way PIL's plugins read
 * them (image_probe.c): format, stored size, the mode PIL opens it in, the
 * EXIF and XMP blocks exif_transpose looks at, and PIL's refusals that come
 * before pixel decoding (bad PNG chunk CRCs before IDAT, unsupported BMP
 * layouts, animated WebP, ...). */
#ifndef H3_MEDIA_IMAGE_PROBE_H
#define H3_MEDIA_IMAGE_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "media/image_read.h"

typedef struct h3_image_probe {
  h3_image_format format;
  int width, height;   /* as stored */
  char pil_mode[8];    /* "RGB", "RGBA", "L", "LA", "P", "1", "I;16", "I" */
  uint8_t *exif;       /* malloc'd EXIF block (NULL: none), as PIL's info["exif"] */
  size_t exif_n;
  uint8_t *xmp;        /* malloc'd XMP packet (NULL: none) */
  size_t xmp_n;
  int palette_entries; /* PNG PLTE / BMP colour table entries (0: no palette) */
  int xmp_png_key;     /* the XMP came from a PNG "XML:com.adobe.xmp" text (read by every Pillow) */
  int exact;           /* 0: PIL's pixels are not reproduced exactly (see note) */
  char note[256];      /* what the conversion drops or approximates ("" = nothing) */
} h3_image_probe;

/* d holds the whole file (n bytes). */
h3_status h3_image_probe_buffer(const uint8_t *d, size_t n, const char *name, h3_image_probe *p);
void h3_image_probe_free(h3_image_probe *p);

#endif
