#ifndef GATEHOUSE_C_TEST_SUPPORT_H
#define GATEHOUSE_C_TEST_SUPPORT_H

/// How many tests Swift Testing runs at once in this process (its
/// SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH), 0 when unlimited.
int gatehouse_test_parallelization_width(void);

#endif
