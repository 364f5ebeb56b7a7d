/*
 * error.h - what the library adds to the errors of wshard.h.  Not part
 * of the API.
 */
#ifndef WSHARD_ERROR_H
#define WSHARD_ERROR_H

#include "wshard.h"

/* Clears err to WSHARD_OK and an empty message. */
void wshard_error_clear(struct wshard_error *err);

#endif /* WSHARD_ERROR_H */
