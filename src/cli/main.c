#include <stdio.h>
#include <string.h>

#include "h3/h3.h"

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help")) {
    printf("usage: h3 COMMAND ...\n");
    return 0;
  }
  fprintf(stderr, "h3: unknown command '%s'\n", argv[1]);
  return 2;
}
