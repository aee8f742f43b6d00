/* WAV writer: IEEE float 32-bit (WAVE_FORMAT_IEEE_FLOAT, format tag 3), samples
 * interleaved, little-endian, exactly as given (no clamping, no dither): the
 * soundtrack of §7.3 (2 channels at 32 kHz) bit for bit.  Header: RIFF/WAVE,
 * an 18-byte "fmt " chunk (cbSize 0), a "fact" chunk (sample frames, required
 * for non-PCM formats) and "data".  Written atomically ("<path>.tmp.<pid>" then
 * rename; removed on failure). */
#ifndef H3_MEDIA_WAV_WRITER_H
#define H3_MEDIA_WAV_WRITER_H

#include "media/media.h"

#define H3_WAV_HEADER_BYTES 58 /* RIFF 12 + fmt 26 + fact 12 + data header 8 */

h3_status h3_wav_write(const char *path, const h3_audio_track *audio);

#endif
