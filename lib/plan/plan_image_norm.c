/*
 * plan_image_norm.c - the values of an "image_norm" extra: vLLM moves an
 * image processor's rescale and normalisation onto the device for the
 * models that allow it (mm_device_do_normalize, on by default), as one
 * per-channel affine map whose two F32 buffers are part of the model's
 * state (vllm/model_executor/layers/fusion/mm_input_norm.py,
 * build_mm_input_norm and _load_norm_params).  They come from the
 * checkpoint's processor config, found as vLLM finds it.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wshard.h"
#include "base/fileio.h"
#include "source/catalog.h"
#include "rules/rules.h"
#include "plan_impl.h"

/* The parsed JSON file name of the checkpoint, NULL when it has none. */
static enum wshard_err load(const struct wshard_catalog *cat, const char *name,
			    json_t **out, struct wshard_error *err)
{
	char *text;
	size_t i, len;
	json_error_t jerr;
	enum wshard_err rc;

	*out = NULL;
	for (i = 0; i < cat->nextra && strcmp(cat->extra[i], name); i++)
		;
	if (i == cat->nextra)
		return WSHARD_OK;
	rc = wshard_catalog_slurp(cat, name, &text, &len, err);
	if (rc)
		return rc;
	/* tokenizer_config.json's model_max_length is often 1e30 written as
	 * an integer, past what jansson holds as one */
	*out = json_loadb(text, len, JSON_DECODE_INT_AS_REAL, &jerr);
	free(text);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return wshard_error_set(err, WSHARD_EINVAL, "'%s/%s': not a JSON object (%s)",
					cat->dir, name, jerr.text);
	}
	return WSHARD_OK;
}

/*
 * vLLM's get_processor_config: the first of these files that names a
 * processor_class.  *file is set to its name.
 */
static enum wshard_err processor_config(const struct wshard_catalog *cat, json_t **out,
					const char **file, struct wshard_error *err)
{
	static const char *const names[] = {
		"processor_config.json", "preprocessor_config.json", "tokenizer_config.json",
	};
	size_t i;
	enum wshard_err rc;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		rc = load(cat, names[i], out, err);
		if (rc)
			return rc;
		*file = names[i];
		if (*out && json_object_get(*out, "processor_class"))
			return WSHARD_OK;
		json_decref(*out);
		*out = NULL;
	}
	return WSHARD_OK;
}

static bool has_norm_key(json_t *c)
{
	return json_object_get(c, "do_normalize") || json_object_get(c, "do_rescale") ||
	       json_object_get(c, "image_mean") || json_object_get(c, "image_std");
}

/*
 * The object _load_norm_params reads: the processor config's
 * "image_processor" (or the config itself); when that has no key of the
 * normalisation, transformers' get_image_processor_config (the
 * "image_processor" of processor_config.json, else preprocessor_config.json);
 * then its "media_proc_cfg" if any.  *root owns it; NULL: none.
 */
static enum wshard_err norm_config(const struct wshard_catalog *cat, json_t **root,
				   json_t **cfg, const char **file, struct wshard_error *err)
{
	json_t *c;
	enum wshard_err rc = processor_config(cat, root, file, err);

	if (rc)
		return rc;
	c = json_object_get(*root, "image_processor");
	c = json_is_object(c) ? c : *root;
	if (!c || !has_norm_key(c)) {
		json_decref(*root);
		*file = "processor_config.json";
		rc = load(cat, *file, root, err);
		c = rc ? NULL : json_object_get(*root, "image_processor");
		if (!rc && !json_is_object(c)) {
			json_decref(*root);
			*file = "preprocessor_config.json";
			rc = load(cat, *file, root, err);
			c = *root;
		}
		if (rc)
			return rc;
	}
	if (c && json_is_object(json_object_get(c, "media_proc_cfg")))
		c = json_object_get(c, "media_proc_cfg");
	*cfg = c;
	return WSHARD_OK;
}

/* Python's bool() of a JSON value; dflt when absent. */
static bool truthy(json_t *v, bool dflt)
{
	if (!v)
		return dflt;
	if (json_is_number(v))
		return json_number_value(v) != 0;
	if (json_is_string(v))
		return json_string_length(v) != 0;
	if (json_is_array(v))
		return json_array_size(v) != 0;
	if (json_is_object(v))
		return json_object_size(v) != 0;
	return json_is_true(v);
}

/* Reads the numeric array key of c into v (up to max), *n its length. */
static enum wshard_err numbers(json_t *c, const char *key, const char *file,
			       double *v, size_t max, size_t *n, struct wshard_error *err)
{
	json_t *a = json_object_get(c, key);
	size_t i;

	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > max)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"%s\" is not an array of 1 to %zu numbers", file,
					key, max);
	for (i = 0; i < json_array_size(a); i++) {
		if (!json_is_number(json_array_get(a, i)))
			return wshard_error_set(err, WSHARD_EINVAL,
						"'%s': \"%s\"[%zu] is not a number", file, key, i);
		v[i] = json_number_value(json_array_get(a, i));
	}
	*n = i;
	return WSHARD_OK;
}

/* rescale_factor, mean and std as _load_norm_params resolves them. */
static enum wshard_err norm_params(json_t *c, const char *file, double *rescale,
				   double *mean, double *std, size_t *n,
				   struct wshard_error *err)
{
	bool has = json_object_get(c, "image_mean") && json_object_get(c, "image_std");
	bool norm = truthy(json_object_get(c, "do_normalize"), has);
	json_t *rf = json_object_get(c, "rescale_factor");
	size_t i, nstd;
	enum wshard_err rc;

	*rescale = 1.0;
	if (truthy(json_object_get(c, "do_rescale"), has))
		*rescale = rf ? json_number_value(rf) : 1.0 / 255;
	if ((rf && truthy(json_object_get(c, "do_rescale"), has) && !json_is_number(rf)) ||
	    *rescale == 0.0)
		return wshard_error_set(err, WSHARD_EINVAL,
					"'%s': \"rescale_factor\" is not a non-zero number", file);
	if (!norm) {
		for (i = 0; i < 3; i++)
			mean[i] = 0.0, std[i] = 1.0;
		*n = 3;
		return WSHARD_OK;
	}
	rc = numbers(c, "image_mean", file, mean, WSHARD_IMAGE_NORM_MAX, n, err);
	if (!rc)
		rc = numbers(c, "image_std", file, std, WSHARD_IMAGE_NORM_MAX, &nstd, err);
	if (!rc && nstd != *n)
		rc = wshard_error_set(err, WSHARD_EINVAL,
				      "'%s': \"image_mean\" has %zu entries, \"image_std\" %zu",
				      file, *n, nstd);
	return rc;
}

/* NormParams.is_identity: math.isclose as vLLM calls it. */
static bool is_identity(double rescale, const double *mean, const double *std, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		double s = rescale / std[i], m = mean[i] / std[i];

		if (fabs(s - 1.0) > fmax(1e-5 * fmax(fabs(s), 1.0), 1e-8) || fabs(m) > 1e-8)
			return false;
	}
	return true;
}

enum wshard_err plan_image_norm(const struct wshard_catalog *cat,
				enum rules_image_norm which, double *vals, size_t *n,
				struct wshard_error *err)
{
	json_t *root = NULL, *cfg = NULL;
	const char *file = NULL;
	double rescale = 1.0, mean[WSHARD_IMAGE_NORM_MAX], std[WSHARD_IMAGE_NORM_MAX];
	char *path = NULL;
	size_t i;
	enum wshard_err rc;

	*n = 0;
	rc = norm_config(cat, &root, &cfg, &file, err);
	if (!rc && cfg) {
		path = wshard_path_join(cat->dir, file);
		rc = path ? norm_params(cfg, path, &rescale, mean, std, n, err)
			  : wshard_error_set(err, WSHARD_ENOMEM, "out of memory");
	}
	if (!rc && *n && is_identity(rescale, mean, std, *n))
		*n = 0;	/* vLLM's IdentityInputNorm holds no tensor */
	/* in F32 as torch computes them from F32 mean and std: rescale / std
	 * is Tensor.__rtruediv__, std.reciprocal() * rescale */
	for (i = 0; !rc && i < *n; i++)
		vals[i] = which == RULES_IMAGE_NORM_SCALE ? (1.0f / (float)std[i]) * (float)rescale
							  : -(float)mean[i] / (float)std[i];
	if (rc)
		*n = 0;
	free(path);
	json_decref(root);
	return rc;
}
