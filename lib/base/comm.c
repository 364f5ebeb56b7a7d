/*
 * comm.c - the processes of one convert: an MPI job when mpirun started
 * us, else this process alone (and MPI is never initialised, so no daemon
 * is involved).  Everything above this file calls the same functions.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "wshard.h"
#include "comm.h"
#include "hooks.h"

struct wshard_comm {
	bool mpi;
	bool crowded;		/* more processes on this node than cores */
	int rank, size, local_rank;
};

/* Variables Open MPI's (and PMIx/PMI) launchers set in each process. */
static bool launched_by_mpirun(void)
{
	return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") ||
	       getenv("PMI_RANK");
}

/*
 * On a job whose processes all run on one node, and unless the user chose
 * a point-to-point layer (mpirun --mca pml X, or OMPI_MCA_pml), Open MPI
 * is asked for ob1, whose shared-memory transport (vader) is the usual
 * path between processes of one node.  Left to itself, Open MPI 4 first
 * probes the cm layer's network libraries (PSM, PSM2, OFI) and UCX, which
 * makes MPI_Init several times slower.  Jobs across nodes keep Open MPI's
 * own choice (UCX on InfiniBand, say).
 */
static void prefer_shared_memory(void)
{
	const char *size = getenv("OMPI_COMM_WORLD_SIZE");
	const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");

	if (size && local && strcmp(size, local) == 0 && !getenv("OMPI_MCA_pml"))
		setenv("OMPI_MCA_pml", "ob1", 0);
}

enum wshard_err wshard_comm_init(struct wshard_comm **out_comm, int *argc,
				 char ***argv, struct wshard_error *err)
{
	struct wshard_comm *c = calloc(1, sizeof(*c));
	const char *lr;

	*out_comm = NULL;
	if (!c)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	c->size = 1;
	if (launched_by_mpirun()) {
		int provided;

		prefer_shared_memory();
		/* helper threads (sealing, hashing) never call MPI */
		if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
			free(c);
			return wshard_error_set(err, WSHARD_EIO, "cannot initialise MPI");
		}
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
		c->mpi = true;
		MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
		MPI_Comm_size(MPI_COMM_WORLD, &c->size);
	}
	if (c->mpi) {
		/*
		 * The process's number among those of its node (its GPU), from
		 * MPI itself whatever the launcher (mpirun, srun, ...); Open MPI's
		 * variable where MPI cannot tell.
		 */
		MPI_Comm node;

		c->local_rank = -1;
		if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
					&node) == MPI_SUCCESS) {
			int local_size = 0;
			long cores = sysconf(_SC_NPROCESSORS_ONLN);

			if (MPI_Comm_rank(node, &c->local_rank) != MPI_SUCCESS)
				c->local_rank = -1;
			if (MPI_Comm_size(node, &local_size) == MPI_SUCCESS && cores > 0)
				c->crowded = local_size > cores;
			MPI_Comm_free(&node);
		}
		lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
		if (c->local_rank < 0)
			c->local_rank = lr ? atoi(lr) : 0;
	}
	wshard_fault_set_process(c->rank);
	*out_comm = c;
	return WSHARD_OK;
}

int wshard_comm_rank(const struct wshard_comm *comm)
{
	return comm->rank;
}

int wshard_comm_size(const struct wshard_comm *comm)
{
	return comm->size;
}

int wshard_comm_local_rank(const struct wshard_comm *comm)
{
	return comm->local_rank;
}

bool wshard_comm_is_mpi(const struct wshard_comm *comm)
{
	return comm->mpi;
}

/*
 * Waits for a nonblocking MPI operation (crowded processes only; the
 * others make the blocking calls).  Open MPI's blocking
 * calls poll without pause, which is quickest when every process has a
 * core.  With more processes on the node than cores (four ranks
 * converted on a two-core machine), a process that waits for another
 * spins on the core that other one needs, and the polling takes a good
 * part of the CPU time.  Such a process polls for a moment, then
 * sleeps between polls, for longer the longer it waits (at most
 * WAIT_SLEEP_MAX_NS; a step of the exchange moves megabytes, so the
 * latency added is small beside it).
 */
#define WAIT_SPIN 64
#define WAIT_SLEEP_MIN_NS 8000L
#define WAIT_SLEEP_MAX_NS 256000L

static int wait_gently(MPI_Request *req)
{
	struct timespec ts = { 0, WAIT_SLEEP_MIN_NS };
	int done = 0, i, rc;

	for (i = 0;; i++) {
		rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS || done)
			return rc;
		if (i < WAIT_SPIN)
			continue;
		nanosleep(&ts, NULL);
		if (ts.tv_nsec < WAIT_SLEEP_MAX_NS)
			ts.tv_nsec *= 2;
	}
}

enum wshard_err wshard_comm_agree(struct wshard_comm *comm,
				  struct wshard_error *err)
{
	struct {
		int code;
		char msg[WSHARD_ERRMAX];
	} msg;
	MPI_Request req;
	int mine, first, rc;

	if (!comm->mpi)
		return err->code;
	mine = err->code != WSHARD_OK ? comm->rank : INT_MAX;
	if (comm->crowded)
		rc = MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
	else
		rc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (rc == MPI_SUCCESS && comm->crowded)
		rc = wait_gently(&req);
	if (rc != MPI_SUCCESS)
		return wshard_error_set(err, WSHARD_EIO, "MPI_Allreduce failed");
	if (first == INT_MAX)
		return WSHARD_OK;
	if (comm->rank == first) {
		msg.code = err->code;
		memcpy(msg.msg, err->msg, sizeof(msg.msg));
	}
	MPI_Bcast(&msg, sizeof(msg), MPI_BYTE, first, MPI_COMM_WORLD);
	err->code = (enum wshard_err)msg.code;
	memcpy(err->msg, msg.msg, sizeof(err->msg));
	err->msg[sizeof(err->msg) - 1] = '\0';
	return err->code;
}

enum wshard_err wshard_comm_alltoallv(struct wshard_comm *comm,
				      const void *sendbuf, const uint64_t *sendcounts,
				      void *recvbuf, const uint64_t *recvcounts,
				      struct wshard_error *err)
{
	int *sc = NULL, *sd = NULL, *rc = NULL, *rd = NULL;
	MPI_Request req;
	uint64_t so = 0, ro = 0;
	int i, n = comm->size, mrc;
	enum wshard_err ret = WSHARD_OK;

	if (!comm->mpi) {
		if (sendcounts[0])
			memmove(recvbuf, sendbuf, sendcounts[0]);
		return WSHARD_OK;
	}
	sc = calloc((size_t)n, sizeof(int));
	sd = calloc((size_t)n, sizeof(int));
	rc = calloc((size_t)n, sizeof(int));
	rd = calloc((size_t)n, sizeof(int));
	if (!sc || !sd || !rc || !rd) {
		ret = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (so + sendcounts[i] > INT_MAX || ro + recvcounts[i] > INT_MAX) {
			ret = wshard_error_set(err, WSHARD_EIO,
					       "an MPI exchange of over 2 GiB; lower --max-memory");
			goto out;
		}
		sc[i] = (int)sendcounts[i];
		sd[i] = (int)so;
		rc[i] = (int)recvcounts[i];
		rd[i] = (int)ro;
		so += sendcounts[i];
		ro += recvcounts[i];
	}
	if (comm->crowded)
		mrc = MPI_Ialltoallv(sendbuf, sc, sd, MPI_BYTE, recvbuf, rc, rd, MPI_BYTE,
				     MPI_COMM_WORLD, &req);
	else
		mrc = MPI_Alltoallv(sendbuf, sc, sd, MPI_BYTE, recvbuf, rc, rd, MPI_BYTE,
				    MPI_COMM_WORLD);
	if (mrc == MPI_SUCCESS && comm->crowded)
		mrc = wait_gently(&req);
	if (mrc != MPI_SUCCESS)
		ret = wshard_error_set(err, WSHARD_EIO, "MPI_Alltoallv failed");
out:
	free(sc);
	free(sd);
	free(rc);
	free(rd);
	return ret;
}

enum wshard_err wshard_comm_sum_u64(struct wshard_comm *comm, uint64_t *vals,
				    size_t n, struct wshard_error *err)
{
	if (!comm->mpi || n == 0)
		return WSHARD_OK;
	if (MPI_Allreduce(MPI_IN_PLACE, vals, (int)n, MPI_UINT64_T, MPI_SUM,
			  MPI_COMM_WORLD) != MPI_SUCCESS)
		return wshard_error_set(err, WSHARD_EIO, "MPI_Allreduce failed");
	return WSHARD_OK;
}

enum wshard_err wshard_comm_gather_bytes(struct wshard_comm *comm,
					 const void *buf, size_t len,
					 char **out_all, size_t **out_lens,
					 struct wshard_error *err)
{
	long long mine = (long long)len, *lens = NULL;
	int *counts = NULL, *displs = NULL, i, n = comm->size;
	size_t total = 0, *out = NULL;
	char *all = NULL;
	enum wshard_err rc = WSHARD_OK;

	*out_all = NULL;
	*out_lens = NULL;
	out = calloc((size_t)n, sizeof(size_t));
	if (!out)
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	if (!comm->mpi) {
		all = malloc(len + 1);
		if (!all) {
			free(out);
			return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		}
		memcpy(all, buf, len);
		out[0] = len;
		*out_all = all;
		*out_lens = out;
		return WSHARD_OK;
	}
	if (len > INT_MAX) {
		free(out);
		return wshard_error_set(err, WSHARD_EIO, "a manifest part of over 2 GiB");
	}
	lens = calloc((size_t)n, sizeof(*lens));
	counts = calloc((size_t)n, sizeof(int));
	displs = calloc((size_t)n, sizeof(int));
	if (!lens || !counts || !displs) {
		rc = wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
		goto out;
	}
	MPI_Gather(&mine, 1, MPI_LONG_LONG, lens, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	if (comm->rank == 0) {
		for (i = 0; i < n; i++) {
			counts[i] = (int)lens[i];
			displs[i] = (int)total;
			out[i] = (size_t)lens[i];
			total += (size_t)lens[i];
		}
		all = malloc(total + 1);
	}
	if (MPI_Gatherv(buf, (int)len, MPI_BYTE, all, counts, displs, MPI_BYTE, 0,
			MPI_COMM_WORLD) != MPI_SUCCESS) {
		rc = wshard_error_set(err, WSHARD_EIO, "MPI_Gatherv failed");
		goto out;
	}
	if (comm->rank == 0) {
		*out_all = all;
		*out_lens = out;
		all = NULL;
		out = NULL;
	}
out:
	free(all);
	free(out);
	free(lens);
	free(counts);
	free(displs);
	return rc;
}

enum wshard_err wshard_comm_bcast_bytes(struct wshard_comm *comm, const void *buf,
					size_t len, char **out_buf, size_t *out_len,
					struct wshard_error *err)
{
	long long n = (long long)len;
	int mine, all = 1;
	char *copy;

	*out_buf = NULL;
	*out_len = 0;
	if (comm->mpi && MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
		return wshard_error_set(err, WSHARD_EIO, "MPI_Bcast failed");
	if (n < 0 || n > INT_MAX)
		return wshard_error_set(err, WSHARD_EIO, "a broadcast of over 2 GiB");
	copy = malloc((size_t)n + 1);
	/* every process must have room before any byte is sent */
	mine = copy != NULL;
	if (comm->mpi && MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN,
				       MPI_COMM_WORLD) != MPI_SUCCESS) {
		free(copy);
		return wshard_error_set(err, WSHARD_EIO, "MPI_Allreduce failed");
	}
	if (!mine || !all) {
		free(copy);
		return wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	if (comm->rank == 0 && n)
		memcpy(copy, buf, (size_t)n);
	if (comm->mpi && MPI_Bcast(copy, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
		free(copy);
		return wshard_error_set(err, WSHARD_EIO, "MPI_Bcast failed");
	}
	copy[n] = '\0';
	*out_buf = copy;
	*out_len = (size_t)n;
	return WSHARD_OK;
}

void wshard_comm_free(struct wshard_comm *comm)
{
	if (!comm)
		return;
	if (comm->mpi)
		MPI_Finalize();
	free(comm);
}
