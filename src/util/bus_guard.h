// bus_guard.h: reads of a memory-mapped file that survive the file shrinking.
// A page of a map past the file's new end faults with SIGBUS; without a
// handler that kills the process with no message. The guard catches the
// fault for the length of one call and turns it into an error return.
#ifndef WGPT_BUS_GUARD_H
#define WGPT_BUS_GUARD_H

// Runs fn(arg) with SIGBUS caught (the previous handler is put back after).
// Returns 0, or -1 if fn touched mapped memory that no longer exists: fn was
// cut short there, so what it wrote is partial. fn must not leave locks or
// allocations behind if stopped midway (plain copies and scans). Safe on any
// thread; not reentrant on one.
int wgpt_bus_guard_run(void (*fn)(void *arg), void *arg);

// The same inside a wgpt_bus_guard_run: on a thread that its fn started and
// joins before it returns, or on its own thread (so that a fault there does
// not jump past the joins): it catches this thread's faults with the handler
// the outer call put in place (it installs none itself).
int wgpt_bus_guard_run_within(void (*fn)(void *arg), void *arg);

#endif
