/* The ncclDebugLogger_t the simulator hands to v4+ plugins: formats with vsnprintf and
 * forwards level + message to a Rust callback installed with ncclprof_sim_set_log_sink. */
#include <stdarg.h>
#include <stdio.h>

typedef void (*ncclprof_sim_sink_t)(int level, unsigned long flags, const char *file, int line,
                                    const char *msg);

static ncclprof_sim_sink_t sink = 0;

void ncclprof_sim_set_log_sink(ncclprof_sim_sink_t s) { sink = s; }

void ncclprof_sim_logger(int level, unsigned long flags, const char *file, int line,
                         const char *fmt, ...) {
  char buf[2048];
  buf[0] = 0;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
  }
  if (sink) sink(level, flags, file, line, buf);
}
