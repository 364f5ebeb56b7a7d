/*
 * transpose.h - the copy of a transposed piece, apart from the stream's
 * private header so that transpose.c, at the bottom of the stage, needs
 * nothing of the files above it.  Not part of the API.
 */
#ifndef WSHARD_STREAM_TRANSPOSE_H
#define WSHARD_STREAM_TRANSPOSE_H

#include "wshard.h"
#include "plan/plan.h"

/*
 * One source row of transposed piece p (src: its byte col0) into dst,
 * out_ncols bytes: tr_rows sub-rows of tr_width bytes, tr_stride apart,
 * written transposed (and converted when p->from != p->to).
 */
void stream_transpose_row(const struct wshard_piece *p, const char *src, char *dst);

#endif /* WSHARD_STREAM_TRANSPOSE_H */
