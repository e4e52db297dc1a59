#ifndef GATEHOUSE_C_TEST_SUPPORT_H
#define GATEHOUSE_C_TEST_SUPPORT_H

/// How many tests Swift Testing runs at once in this process (its
/// SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH), 0 when unlimited.
int gatehouse_test_parallelization_width(void);

#if defined(__linux__)
#include <spawn.h>

/// `posix_spawn_file_actions_addclosefrom_np(actions, from)` (glibc 2.34+, a GNU extension Swift
/// does not see): the child closes every descriptor from `from` up.
int gatehouse_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from);

/// `posix_spawn_file_actions_addchdir_np(actions, path)` (glibc 2.29+): the child starts in `path`.
int gatehouse_spawn_addchdir(posix_spawn_file_actions_t *actions, const char *path);

/// `pipe2(fds, O_CLOEXEC)`.
int gatehouse_pipe_cloexec(int fds[2]);
#endif

#endif
