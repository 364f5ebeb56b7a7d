/*
 * plan_expert.c - expert parallelism: which rank holds which experts, as
 * vLLM 0.32's determine_expert_map (fused_moe/expert_map_manager.py)
 * places them, and the effective placement vLLM falls back to.
 */
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "source/catalog.h"
#include "plan_impl.h"

static const char *const placement_names[] = { "linear", "round_robin" };

const char *wshard_placement_name(enum wshard_placement p)
{
	return (unsigned)p < 2 ? placement_names[p] : NULL;
}

int wshard_placement_parse(const char *name, enum wshard_placement *out_p)
{
	unsigned i;

	for (i = 0; i < 2; i++)
		if (strcmp(name, placement_names[i]) == 0) {
			*out_p = (enum wshard_placement)i;
			return 0;
		}
	return -1;
}

long wshard_expert_range(long num_experts, int ep_size, int rank,
			 enum wshard_placement p, long *out_first, long *out_stride)
{
	long base = num_experts / ep_size, rem = num_experts % ep_size;
	long local = base + (rank < rem ? 1 : 0);

	if (p == WSHARD_PLACE_ROUND_ROBIN) {
		*out_first = rank;
		*out_stride = ep_size;
	} else {
		*out_first = (long)rank * base + (rank < rem ? rank : rem);
		*out_stride = 1;
	}
	return local;
}

int plan_expert_owner(const struct wshard_plan *plan, long num_experts, long e)
{
	long base = num_experts / plan->tp, rem = num_experts % plan->tp;

	if (plan->placement == WSHARD_PLACE_ROUND_ROBIN)
		return (int)(e % plan->tp);
	/* the first rem ranks hold base + 1 each */
	if (e < rem * (base + 1))
		return (int)(e / (base + 1));
	return (int)(rem + (e - rem * (base + 1)) / base);
}

enum wshard_placement plan_effective_placement(const struct wshard_catalog *cat,
					       const struct wshard_options *opt)
{
	json_int_t groups;

	/*
	 * vLLM honours round_robin only for grouped top-k routing
	 * (num_expert_group > 1, DeepSeek's n_group); otherwise it warns and
	 * places linearly.  Mixtral, Qwen2-MoE and Qwen3-MoE route ungrouped.
	 */
	groups = json_integer_value(json_object_get(cat->config.json, "n_group"));
	if (opt->placement == WSHARD_PLACE_ROUND_ROBIN && groups > 1)
		return WSHARD_PLACE_ROUND_ROBIN;
	return WSHARD_PLACE_LINEAR;
}
