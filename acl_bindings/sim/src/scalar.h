/*
 * scalar.h - the simulated aclScalar (libnnopbase, nnopbase_scalar.c) and how an operator reads one.
 */
#ifndef CANNSIM_SCALAR_H
#define CANNSIM_SCALAR_H

#include "cannsim.h"

typedef struct aclScalar aclScalar;

/* Copy a live scalar's dtype and value bytes (at most 8) into *dtype and bytes.  Returns 0, or 161002 with a
   message when scalar is not a live aclScalar.  Takes the lock. */
CANNSIM_API int cannsim_scalar_read(const char *func, const aclScalar *scalar, int *dtype, unsigned char bytes[8]);

#endif
