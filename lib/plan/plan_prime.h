/*
 * plan_prime.h - a "row" split by prime-sized hash heads (a rule's
 * "prime_heads", plan_prime.c), which plan_split.c's row split hands
 * such a rule to.  Not part of the API.
 */
#ifndef WSHARD_PLAN_PRIME_H
#define WSHARD_PLAN_PRIME_H

#include <stdint.h>

#include "wshard.h"

struct wshard_plan;
struct group_out;
struct member;

/*
 * Rank r holds the rows of its hash heads (m's source seen as rows);
 * shape[0] becomes rank 0's rows (name_and_shape sets each rank's from
 * its pieces).  Returns WSHARD_OK, or WSHARD_EINVAL naming the tensor for
 * a layout vLLM does not load, or WSHARD_ENOMEM.
 */
enum wshard_err plan_split_prime(const struct wshard_plan *plan, struct group_out *g,
				 const struct member *m, uint64_t *shape,
				 struct wshard_error *err);

#endif /* WSHARD_PLAN_PRIME_H */
