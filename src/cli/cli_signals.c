#include "cli/cli_signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "io/outfile.h"

static volatile sig_atomic_t g_sig;

static void on_signal(int sig) {
  if (g_sig) { /* the second: give up now */
    h3_outfile_remove_all_signal_safe();
    static const char msg[] = "\nh3: interrupted\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(sig == SIGTERM ? 143 : 130);
  }
  g_sig = sig;
}

void h3_cli_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

int h3_cli_signal_pending(void) { return g_sig; }
void h3_cli_signal_clear(void) { g_sig = 0; }
int h3_cli_signal_cancelled(void *unused) {
  (void)unused;
  return g_sig != 0;
}
int h3_cli_signal_exit_status(void) { return g_sig == SIGTERM ? 143 : g_sig ? 130 : 1; }
