/*
 * comm.h - what the library uses of the processes beyond
 * the API: their count, the node-local index and the collectives
 * (comm.c).  Not part of the API.
 */
#ifndef WSHARD_COMM_H
#define WSHARD_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "wshard.h"

/* Number of processes. */
int wshard_comm_size(const struct wshard_comm *comm);
/* Node-local index (OMPI_COMM_WORLD_LOCAL_RANK), 0 without MPI. */
int wshard_comm_local_rank(const struct wshard_comm *comm);
/* Collective helpers of comm.c used by the stream, output and verify stages. */
enum wshard_err wshard_comm_alltoallv(struct wshard_comm *comm,
				      const void *sendbuf, const uint64_t *sendcounts,
				      void *recvbuf, const uint64_t *recvcounts,
				      struct wshard_error *err);
enum wshard_err wshard_comm_sum_u64(struct wshard_comm *comm, uint64_t *vals,
				    size_t n, struct wshard_error *err);
enum wshard_err wshard_comm_gather_bytes(struct wshard_comm *comm,
					 const void *buf, size_t len,
					 char **out_all, size_t **out_lens,
					 struct wshard_error *err);
/* Process 0's len bytes at buf, to every process (process 0 included) as a
 * malloc'd NUL-terminated copy in *out_buf of *out_len bytes. */
enum wshard_err wshard_comm_bcast_bytes(struct wshard_comm *comm, const void *buf,
					size_t len, char **out_buf, size_t *out_len,
					struct wshard_error *err);

#endif /* WSHARD_COMM_H */
