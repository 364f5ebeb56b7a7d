/*
 * error.c - error codes and messages.  The first error recorded wins, so a
 * cleanup path that fails after the real cause cannot hide it.
 */
#include <stdarg.h>
#include <stdio.h>

#include "wshard.h"
#include "error.h"

const char *wshard_strerror(enum wshard_err code)
{
	switch (code) {
	case WSHARD_OK: return "success";
	case WSHARD_EINVAL: return "bad input";
	case WSHARD_EUSAGE: return "usage error";
	case WSHARD_EIO: return "I/O error";
	case WSHARD_ENOMEM: return "out of memory";
	case WSHARD_EVALIDATE: return "validation failed";
	case WSHARD_EMISMATCH: return "differences found";
	case WSHARD_ENODEV: return "no usable GPU";
	case WSHARD_EEXIST: return "output exists";
	case WSHARD_EBUSY: return "output is locked";
	case WSHARD_ENOTCACHED: return "not in the HuggingFace cache";
	}
	return "unknown error";
}

enum wshard_err wshard_error_set(struct wshard_error *err, enum wshard_err code,
				 const char *fmt, ...)
{
	va_list ap;

	if (!err || err->code != WSHARD_OK)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

void wshard_error_clear(struct wshard_error *err)
{
	if (!err)
		return;
	err->code = WSHARD_OK;
	err->msg[0] = '\0';
}
