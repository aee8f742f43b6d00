/* Small filesystem questions asked when resolving snapshot layouts. */
#ifndef H3_IO_PATHS_H
#define H3_IO_PATHS_H

#include <stdbool.h>

/* p names an existing directory / regular file (symbolic links followed). */
bool h3_is_dir(const char *p);
bool h3_is_file(const char *p);

#endif
