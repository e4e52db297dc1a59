// GNU extensions of posix_spawn and pipe for the tests' ChildProcess (GatehouseTestSupport),
// which Swift's Glibc module does not import.
#if defined(__linux__)
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>
#include "CTestSupport.h"

int gatehouse_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int gatehouse_spawn_addchdir(posix_spawn_file_actions_t *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np(actions, path);
}

int gatehouse_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}
#endif
