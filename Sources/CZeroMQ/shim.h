#ifndef GATEHOUSE_CZEROMQ_SHIM_H
#define GATEHOUSE_CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif

/// errno is a macro on some platforms; expose it to Swift as a function.
static inline int czmq_errno(void) { return zmq_errno(); }

#endif
