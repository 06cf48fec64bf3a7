// USDT probes: <sys/sdt.h> from systemtap (Debian's systemtap-sdt-dev), which bpftrace, perf and
// bcc attach to (`usdt:BINARY:block:block_rq_issue`). With no tracer attached a probe is one nop
// instruction and its arguments stay where the compiler already had them; a note in the ELF file
// tells the tracer where the nop is. Built without sdt.h (or with -DBIOFS_USDT=OFF) a probe is
// nothing at all.
#pragma once

#if defined(BIOFS_USDT) && BIOFS_USDT && __has_include(<sys/sdt.h>)
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>
#define BIOFS_PROBE(provider, name, ...) STAP_PROBEV(provider, name, ##__VA_ARGS__)
#define BIOFS_HAS_USDT 1
#else
#define BIOFS_PROBE(provider, name, ...) \
  do {                                   \
  } while (0)
#define BIOFS_HAS_USDT 0
#endif
