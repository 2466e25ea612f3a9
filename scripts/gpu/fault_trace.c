/* LD_PRELOAD diagnostic: on SIGFPE/SIGSEGV/SIGILL/SIGBUS print the faulting instruction's library,
   symbol and offset plus a backtrace, then re-raise. Diagnosis only; never shipped. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
static void handler(int sig, siginfo_t *si, void *uc_) {
  ucontext_t *uc = (ucontext_t *)uc_;
  void *rip = (void *)uc->uc_mcontext.gregs[REG_RIP];
  Dl_info info; memset(&info, 0, sizeof info);
  char buf[1024];
  if (dladdr(rip, &info)) {
    int n = snprintf(buf, sizeof buf, "FPE-TRACE signal %d code %d at %p in %s (base %p) sym %s+%#lx\n", sig, si->si_code, rip,
                     info.dli_fname ? info.dli_fname : "?", info.dli_fbase,
                     info.dli_sname ? info.dli_sname : "?",
                     (unsigned long)((char *)rip - (char *)(info.dli_saddr ? info.dli_saddr : info.dli_fbase)));
    write(2, buf, n);
  } else {
    int n = snprintf(buf, sizeof buf, "FPE-TRACE signal %d at %p (no dladdr)\n", sig, rip);
    write(2, buf, n);
  }
  void *frames[64]; int k = backtrace(frames, 64);
  write(2, "FPE-TRACE backtrace:\n", 21);
  backtrace_symbols_fd(frames, k, 2);
  signal(sig, SIG_DFL); raise(sig);
}
__attribute__((constructor)) static void install(void) {
  struct sigaction sa; memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler; sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigaction(SIGFPE, &sa, 0); sigaction(SIGSEGV, &sa, 0); sigaction(SIGILL, &sa, 0); sigaction(SIGBUS, &sa, 0);
}
