// Caps how many tests Swift Testing runs at once in the test process, unless the caller chose.
//
// By default Swift Testing starts every test at once: on 2 cores that queues hundreds of tasks
// on the 2 threads of the cooperative pool, and a task resumed when an RPC reply or deadline
// arrives waits behind them for a second or more. The RPC suites assert latencies (a 200 ms
// deadline reported within 1 s, a 300 ms call seen in flight), and failed in most full runs.
// Eight tests at a time kept those green and the run as fast (tests/parallel in BENCHMARKS.md).
//
// Swift Testing reads the variable when its run starts, after this constructor ran (it runs when
// the test binary is loaded). Set SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH yourself to
// choose another width; it is experimental in Swift Testing, and a toolchain that drops it
// simply runs every test at once again.
#include <stdlib.h>
#include "CTestSupport.h"

static const char *const widthVariable = "SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH";

__attribute__((constructor)) static void gatehouse_cap_test_parallelism(void) {
    setenv(widthVariable, "8", 0);
}

int gatehouse_test_parallelization_width(void) {
    const char *value = getenv(widthVariable);
    return value ? atoi(value) : 0;
}
