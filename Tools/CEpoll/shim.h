#ifndef GATEHOUSE_CEPOLL_SHIM_H
#define GATEHOUSE_CEPOLL_SHIM_H
// epoll(7) for the load generator's loop engine (Glibc's Swift module leaves sys/epoll.h out).
#ifdef __linux__
#include <sys/epoll.h>
#endif
#endif
