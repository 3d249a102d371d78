/* shape_ml.c - shape rules of the classical-ML ops (domain ai.onnx.ml), of
 * TfIdfVectorizer and of ImageDecoder (ir/ops/control.def). */
#include <string.h>

#include "shape.h"

int shape_ArrayFeatureExtractor(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *y = mp_in(g, n, 1);
    if (!x || !y) return mp_fail(err, "needs inputs X and Y");
    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    if (x->rank == 0) return mp_fail(err, "X must have rank >= 1");
    /* indices pick along the last axis; a 1-D X reads as one row [1, C] */
    mp_dim d[MP_MAX_RANK], count = MP_DIM_UNKNOWN;
    if (y->rank >= 0 && mp_dims_product(y->dims, y->rank, &count, err)) return -1;
    int rank = x->rank == 1 ? 2 : x->rank;
    for (int i = 0; i < rank - 1; i++) d[i] = x->rank == 1 ? mp_dim_of(1) : x->dims[i];
    d[rank - 1] = count;
    return mp_set_out(g, n, 0, x->dtype, rank, d);
}

int shape_Binarizer(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

/* LabelEncoder-2+ names the output type by which values_* attribute it has;
 * LabelEncoder-1 maps strings to int64 and back. */
int shape_LabelEncoder(mp_graph *g, mp_node *n, mp_err *err)
{
    static const struct {
        const char *attr;
        mp_dtype t;
    } values[] = {{"values_strings", MP_STRING}, {"values_int64s", MP_INT64}, {"values_floats", MP_FLOAT}};
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    mp_dtype t = MP_UNDEFINED;
    const mp_attr *vt = mp_node_attr(n, "values_tensor");
    if (vt && vt->type == MP_ATTR_TENSOR && vt->tensors) t = vt->tensors[0]->dtype;
    for (size_t i = 0; i < sizeof values / sizeof *values && t == MP_UNDEFINED; i++)
        if (mp_node_attr(n, values[i].attr)) t = values[i].t;
    if (t == MP_UNDEFINED && x->dtype == MP_STRING) t = MP_INT64;
    if (t == MP_UNDEFINED && x->dtype == MP_INT64) t = MP_STRING;
    if (t == MP_UNDEFINED) return mp_fail(err, "no values_* attribute names the output type");
    return mp_set_out_like(g, n, 0, t, x);
}

/* TreeEnsemble (ai.onnx.ml 5): X [N, F] -> Y [N, n_targets], X's dtype. */
int shape_TreeEnsemble(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (x->rank >= 0 && x->rank != 2) return mp_fail(err, "X must be 2-D [N, F], has rank %d", x->rank);
    int64_t targets = mp_attr_int(n, "n_targets", -1);
    if (targets == 0 || targets < -1) return mp_fail(err, "n_targets must be positive, is %lld", (long long)targets);
    mp_dim d[2] = {x->rank == 2 ? x->dims[0] : MP_DIM_UNKNOWN, targets > 0 ? mp_dim_of(targets) : MP_DIM_UNKNOWN};
    return mp_set_out(g, n, 0, x->dtype, 2, d);
}

/* X [C] or [N, C] -> float [max(ngram_indexes)+1] or [N, that]. */
int shape_TfIdfVectorizer(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    const int64_t *idx;
    int k = mp_attr_ints(n, "ngram_indexes", &idx);
    if (k < 1) return mp_fail(err, "ngram_indexes must be a non-empty list");
    int64_t top = -1;
    for (int i = 0; i < k; i++) {
        if (idx[i] < 0) return mp_fail(err, "ngram_indexes has a negative entry %lld", (long long)idx[i]);
        if (idx[i] > top) top = idx[i];
    }
    if (x->rank < 0) return mp_set_out(g, n, 0, MP_FLOAT, -1, NULL);
    if (x->rank != 1 && x->rank != 2) return mp_fail(err, "X must be 1-D or 2-D, has rank %d", x->rank);
    mp_dim d[2] = {x->dims[0], mp_dim_of(top + 1)};
    return mp_set_out(g, n, 0, MP_FLOAT, x->rank, x->rank == 1 ? d + 1 : d);
}

/* ---- ImageDecoder: the image size from the file header ------------------- */

/* Unsigned big/little-endian field of `bytes` at off; false past the end. */
static bool rd(const uint8_t *p, size_t n, size_t off, int bytes, bool big, uint64_t *out)
{
    if (off > n || (size_t)bytes > n - off) return false;
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[off + (size_t)i] << (8 * (big ? bytes - 1 - i : i));
    *out = v;
    return true;
}

static bool png_size(const uint8_t *p, size_t n, uint64_t *h, uint64_t *w)
{
    return rd(p, n, 16, 4, true, w) && rd(p, n, 20, 4, true, h);
}

static bool bmp_size(const uint8_t *p, size_t n, uint64_t *h, uint64_t *w)
{
    uint64_t hdr;
    if (!rd(p, n, 14, 4, false, &hdr)) return false;
    if (hdr == 12) return rd(p, n, 18, 2, false, w) && rd(p, n, 20, 2, false, h); /* OS/2 core header */
    if (!rd(p, n, 18, 4, false, w) || !rd(p, n, 22, 4, false, h)) return false;
    int32_t sh = (int32_t)(uint32_t)*h; /* negative height: rows stored top-down */
    *h = sh < 0 ? (uint64_t)(-(int64_t)sh) : (uint64_t)sh;
    return (int32_t)(uint32_t)*w >= 0;
}

/* Walks the marker segments to the first start-of-frame. */
static bool jpeg_size(const uint8_t *p, size_t n, uint64_t *h, uint64_t *w)
{
    size_t i = 2;
    uint64_t len;
    while (i + 1 < n) {
        uint8_t m = p[i + 1];
        if (p[i] != 0xff) return false;
        if (m == 0xff) { /* fill byte */
            i++;
            continue;
        }
        if (m == 0x01 || (m >= 0xd0 && m <= 0xd8)) { /* markers without a length */
            i += 2;
            continue;
        }
        if (m == 0xd9 || m == 0xda || !rd(p, n, i + 2, 2, true, &len) || len < 2) return false;
        if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc)
            return rd(p, n, i + 5, 2, true, h) && rd(p, n, i + 7, 2, true, w);
        i += 2 + (size_t)len;
    }
    return false;
}

/* Skips whitespace and # comments of a Netpbm header. */
static size_t pnm_skip(const uint8_t *p, size_t n, size_t i)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n' || p[i] == '#')) {
        if (p[i] == '#')
            while (i < n && p[i] != '\n') i++;
        else
            i++;
    }
    return i;
}

/* Netpbm P1..P6: "P6 <width> <height> ...". */
static bool pnm_size(const uint8_t *p, size_t n, uint64_t *h, uint64_t *w)
{
    if (n < 2 || p[1] < '1' || p[1] > '6') return false;
    size_t i = 2;
    uint64_t v[2];
    for (int k = 0; k < 2; k++) {
        i = pnm_skip(p, n, i);
        if (i >= n || p[i] < '0' || p[i] > '9') return false;
        for (v[k] = 0; i < n && p[i] >= '0' && p[i] <= '9' && v[k] < (1u << 30); i++) v[k] = v[k] * 10 + (p[i] - '0');
    }
    *w = v[0];
    *h = v[1];
    return true;
}

/* The first IFD's ImageWidth (256) and ImageLength (257) tags. */
static bool tiff_size(const uint8_t *p, size_t n, uint64_t *h, uint64_t *w)
{
    bool big = p[0] == 'M';
    uint64_t ifd, count, tag, type, v;
    bool hw = false, hh = false;
    if (!rd(p, n, 4, 4, big, &ifd) || !rd(p, n, (size_t)ifd, 2, big, &count)) return false;
    for (uint64_t k = 0; k < count; k++) {
        size_t e = (size_t)ifd + 2 + (size_t)k * 12;
        if (!rd(p, n, e, 2, big, &tag) || !rd(p, n, e + 2, 2, big, &type)) return false;
        if ((tag != 256 && tag != 257) || (type != 3 && type != 4)) continue;
        if (!rd(p, n, e + 8, type == 3 ? 2 : 4, big, &v)) return false;
        if (tag == 256) {
            *w = v;
            hw = true;
        } else {
            *h = v;
            hh = true;
        }
    }
    return hw && hh;
}

/* RIFF/WEBP with a lossy (VP8), lossless (VP8L) or extended (VP8X) first chunk. */
static bool webp_size(const uint8_t *p, size_t n, uint64_t *h, uint64_t *w)
{
    uint64_t a, b;
    if (n < 16 || memcmp(p + 8, "WEBP", 4)) return false;
    if (!memcmp(p + 12, "VP8 ", 4)) {
        if (n < 30 || p[23] != 0x9d || p[24] != 0x01 || p[25] != 0x2a) return false;
        if (!rd(p, n, 26, 2, false, &a) || !rd(p, n, 28, 2, false, &b)) return false;
        *w = a & 0x3fff;
        *h = b & 0x3fff;
        return true;
    }
    if (!memcmp(p + 12, "VP8L", 4)) {
        if (n < 25 || p[20] != 0x2f || !rd(p, n, 21, 4, false, &a)) return false;
        *w = (a & 0x3fff) + 1;
        *h = ((a >> 14) & 0x3fff) + 1;
        return true;
    }
    if (!memcmp(p + 12, "VP8X", 4) && rd(p, n, 24, 3, false, &a) && rd(p, n, 27, 3, false, &b)) {
        *w = a + 1;
        *h = b + 1;
        return true;
    }
    return false;
}

/* A JPEG 2000 codestream: the SIZ segment right after SOC. */
static bool j2k_size(const uint8_t *p, size_t n, uint64_t *h, uint64_t *w)
{
    uint64_t xs, ys, xo, yo;
    if (!rd(p, n, 8, 4, true, &xs) || !rd(p, n, 12, 4, true, &ys) || !rd(p, n, 16, 4, true, &xo) ||
        !rd(p, n, 20, 4, true, &yo) || xo > xs || yo > ys)
        return false;
    *w = xs - xo;
    *h = ys - yo;
    return true;
}

/* Finds box `type` among the boxes in [start, end); fills its payload range. */
static bool jp2_box(const uint8_t *p, size_t end, size_t start, const char *type, size_t *body, size_t *body_end)
{
    for (size_t i = start; i + 8 <= end;) {
        uint64_t len, hdr = 8;
        if (!rd(p, end, i, 4, true, &len)) return false;
        if (len == 1) { /* 64-bit length follows the type */
            if (!rd(p, end, i + 8, 8, true, &len)) return false;
            hdr = 16;
        } else if (len == 0) { /* to the end */
            len = end - i;
        }
        if (len < hdr || len > end - i) return false;
        if (!memcmp(p + i + 4, type, 4)) {
            *body = i + (size_t)hdr;
            *body_end = i + (size_t)len;
            return true;
        }
        i += (size_t)len;
    }
    return false;
}

/* A JP2 file: the image header box inside the JP2 header box. */
static bool jp2_size(const uint8_t *p, size_t n, uint64_t *h, uint64_t *w)
{
    size_t a, a_end, b, b_end;
    if (!jp2_box(p, n, 0, "jp2h", &a, &a_end) || !jp2_box(p, a_end, a, "ihdr", &b, &b_end)) return false;
    return rd(p, b_end, b, 4, true, h) && rd(p, b_end, b + 4, 4, true, w);
}

static const struct {
    const char *magic;
    size_t len;
    bool (*size)(const uint8_t *p, size_t n, uint64_t *h, uint64_t *w);
} image_formats[] = {
    {"\x89PNG\r\n\x1a\n", 8, png_size},
    {"BM", 2, bmp_size},
    {"\xff\xd8", 2, jpeg_size},
    {"P", 1, pnm_size},
    {"II*\0", 4, tiff_size},
    {"MM\0*", 4, tiff_size},
    {"RIFF", 4, webp_size},
    {"\xff\x4f\xff\x51", 4, j2k_size},
    {"\0\0\0\x0cjP  \r\n\x87\n", 12, jp2_size},
};

/* Height and width of an encoded image; false when the format is not known. */
static bool image_size(const uint8_t *p, size_t n, int64_t *h, int64_t *w)
{
    for (size_t i = 0; i < sizeof image_formats / sizeof *image_formats; i++) {
        uint64_t hh, ww;
        if (n < image_formats[i].len || memcmp(p, image_formats[i].magic, image_formats[i].len)) continue;
        if (!image_formats[i].size(p, n, &hh, &ww) || hh > INT32_MAX || ww > INT32_MAX) return false;
        *h = (int64_t)hh;
        *w = (int64_t)ww;
        return true;
    }
    return false;
}

/* encoded bytes [n] -> uint8 [H, W, 3 or 1]; H and W known when the bytes are. */
int shape_ImageDecoder(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input encoded_stream");
    if (x->dtype != MP_UNDEFINED && x->dtype != MP_UINT8)
        return mp_fail(err, "encoded_stream must be uint8, is %s", mp_dtype_name(x->dtype));
    if (x->rank >= 0 && x->rank != 1) return mp_fail(err, "encoded_stream must be 1-D, has rank %d", x->rank);
    const char *fmt = mp_attr_str(n, "pixel_format", "RGB");
    int64_t channels = !strcmp(fmt, "Grayscale") ? 1 : (!strcmp(fmt, "RGB") || !strcmp(fmt, "BGR")) ? 3 : -1;
    if (channels < 0) return mp_fail(err, "pixel_format '%s' is not RGB, BGR or Grayscale", fmt);
    mp_dim d[3] = {MP_DIM_UNKNOWN, MP_DIM_UNKNOWN, mp_dim_of(channels)};
    int64_t h, w;
    if (x->konst && x->konst->dtype == MP_UINT8 && image_size(x->konst->data, (size_t)x->konst->numel, &h, &w)) {
        d[0] = mp_dim_of(h);
        d[1] = mp_dim_of(w);
    }
    return mp_set_out(g, n, 0, MP_UINT8, 3, d);
}
