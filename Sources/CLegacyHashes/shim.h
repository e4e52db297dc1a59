#ifndef GATEHOUSE_CLEGACYHASHES_SHIM_H
#define GATEHOUSE_CLEGACYHASHES_SHIM_H
#include <crypt.h>
#include <openssl/evp.h>
#endif
