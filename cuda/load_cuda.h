/*
 * load_cuda.h - the CUDA backend of the loader's device copies
 * (load_cuda.cu), as plain C functions for the dispatch in load_host.c.
 * Each does what base/devload.h says of the wshard_devload_ function of
 * the same name.  Internal to cuda/: only built (and only declared to C)
 * when WSHARD_CUDA is 1.
 */
#ifndef WSHARD_LOAD_CUDA_H
#define WSHARD_LOAD_CUDA_H

#include "base/devload.h"

#ifdef __cplusplus
extern "C" {
#endif

bool wshard_lcuda_usable(void);
enum wshard_err wshard_lcuda_open(struct wshard_devload **out_d, int device,
				  size_t nslots, size_t slot_bytes,
				  struct wshard_error *err);
enum wshard_err wshard_lcuda_attach(struct wshard_devload *d,
				    struct wshard_error *err);
enum wshard_err wshard_lcuda_slot(struct wshard_devload *d, size_t k,
				  unsigned char **out_buf, const char *path,
				  const char *tensor, struct wshard_error *err);
enum wshard_err wshard_lcuda_copy(struct wshard_devload *d, size_t k,
				  size_t off, void *dst, size_t len,
				  const char *path, const char *tensor,
				  struct wshard_error *err);
enum wshard_err wshard_lcuda_queued(struct wshard_devload *d, size_t k,
				    const char *path, const char *tensor,
				    struct wshard_error *err);
enum wshard_err wshard_lcuda_close(struct wshard_devload *d,
				   struct wshard_error *err);

#ifdef __cplusplus
}
#endif

#endif /* WSHARD_LOAD_CUDA_H */
