/*
 * scan.h - the few steps the fast JSON readers share (st_fast.c for
 * safetensors headers, catalog_index.c for the index): white space, one
 * expected character, a plain string, a plain integer.  Each reader takes only the plain
 * kind of JSON and gives up on anything else, leaving it to jansson.
 * Not part of the API.
 */
#ifndef WSHARD_SCAN_H
#define WSHARD_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct scan {
	const char *p, *end;
};

static inline void scan_ws(struct scan *s)
{
	while (s->p < s->end &&
	       (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* Consumes c (after white space); false when it is not next. */
static inline bool scan_eat(struct scan *s, char c)
{
	scan_ws(s);
	if (s->p < s->end && *s->p == c) {
		s->p++;
		return true;
	}
	return false;
}

/*
 * A plain string (printable ASCII, no escapes): its bytes in
 * [*out, *out + *len), and s past its closing quote.
 */
static inline bool scan_str(struct scan *s, const char **out, size_t *len)
{
	const char *q;

	if (!scan_eat(s, '"'))
		return false;
	for (q = s->p; q < s->end && *q != '"'; q++)
		if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e || *q == '\\')
			return false;
	if (q == s->end)
		return false;
	*out = s->p;
	*len = (size_t)(q - s->p);
	s->p = q + 1;
	return true;
}

/*
 * A plain integer's digits: 0 or [1-9][0-9]*, at most 18 of them (so it
 * fits), followed by no fraction, exponent or further digit: its value
 * in *out, and s past it.
 */
static inline bool scan_uint(struct scan *s, uint64_t *out)
{
	uint64_t v = 0;
	int n = 0;

	while (s->p < s->end && *s->p >= '0' && *s->p <= '9' && n <= 18) {
		v = v * 10 + (uint64_t)(*s->p - '0');
		s->p++;
		n++;
	}
	/* JSON allows no leading zero; a fraction or exponent is no integer */
	if (n == 0 || n > 18 || (n > 1 && s->p[-n] == '0') ||
	    (s->p < s->end && (*s->p == '.' || *s->p == 'e' || *s->p == 'E' ||
			       (*s->p >= '0' && *s->p <= '9'))))
		return false;
	*out = v;
	return true;
}

#endif /* WSHARD_SCAN_H */
