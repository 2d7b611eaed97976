// Decode (q_len 1..16): two-phase split-KV attention.
// Phase 1 (xe2t_sdpa_decode_split): one work-group per (BQ rows, KV chunk, batch, HB KV heads);
//   the rows hold every query position of every query head of a KV head's GQA group, so each
//   K/V element is read once per group. Writes the chunk's partial row max (log2 domain), sum
//   and unnormalized O of each of its HB KV heads to scratch. nd-range: global
//   (batch * heads_kv / HB, row_tiles * chunks * NT), local (1, NT).
// Phase 2 (xe2t_sdpa_decode_combine): one work-item per output row; rescales and sums the
//   partials. nd-range: global (batch * heads_kv, q_len * group), local (1, 1).
// Scratch: part_o [batch * heads_kv, chunks, rows, Dv], part_ml [batch * heads_kv, chunks, rows, 2].
#include "sycl_device.hpp"

#include "sdpa_config.hpp"

static_assert(XE2T_KV_STAGE != 2, "decode reads each K/V block once: in place or staged");

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void xe2t_sdpa_decode_split(const xe2t_elem *q, const xe2t_kv *k, const xe2t_kv *v,
                            float *part_o, float *part_ml, int q_len, int kv_len, int heads_q,
                            int heads_kv, float qscale, int causal,
                            int kv_chunk XE2T_KV_SCALE_PARAM) {
  static syclexp::work_group_static<float[Mainloop::LOCAL_FLOATS]> local;
  const auto it = syclext::this_work_item::get_nd_item<2>();
  const int head_groups = heads_kv / XE2T_HB;
  const int b = static_cast<int>(it.get_group(0)) / head_groups;
  const int hkv0 = static_cast<int>(it.get_group(0)) % head_groups * XE2T_HB;
  const int t = static_cast<int>(it.get_local_id(1));
  const xe2t::Geometry g{q_len, kv_len, heads_q, heads_kv, heads_q / heads_kv, causal, qscale};
  const int chunks = (kv_len + kv_chunk - 1) / kv_chunk;
  const int chunk = static_cast<int>(it.get_group(1)) % chunks;
  const int tile_row0 = static_cast<int>(it.get_group(1)) / chunks * XE2T_BQ;
  const int row0 = tile_row0 + t * XE2T_TM;

  Mainloop::Slice slice[XE2T_HB];
#ifdef XE2T_KV
  // Each KV head's K scale folds into its own Q scale (Mainloop::kHeadQscale).
  xe2t::Geometry head_g[XE2T_HB];
  for (int h = 0; h < XE2T_HB; ++h) {
    head_g[h] = g;
    head_g[h].qscale = qscale XE2T_KV_K_SCALE(hkv0 + h);
    slice[h] = Mainloop::Slice::of(q, k, v, head_g[h], b, hkv0 + h);
  }
#else
  for (int h = 0; h < XE2T_HB; ++h) slice[h] = Mainloop::Slice::of(q, k, v, g, b, hkv0 + h);
#endif

  const int blocks_per_chunk = kv_chunk / XE2T_BK;
  const int kb0 = chunk * blocks_per_chunk;
  const int kb1 = sycl::min(kb0 + blocks_per_chunk,
                            Mainloop::block_end(g, sycl::min(tile_row0 + XE2T_BQ, g.rows()) - 1));

  Mainloop::State st[XE2T_HB];
  Mainloop::run<XE2T_HB>(slice, row0, t, kb0, sycl::max(kb0, kb1), &local[0], it.get_group(),
                         st);

  for (int h = 0; h < XE2T_HB; ++h) {
    const size_t part =
        ((static_cast<size_t>(b) * heads_kv + hkv0 + h) * chunks + chunk) * g.rows();
    for (int r = 0; r < XE2T_TM; ++r) {
      const int row = row0 + r;
      if (row >= g.rows()) break;
      part_ml[(part + row) * 2] = st[h].m[r];
      part_ml[(part + row) * 2 + 1] = st[h].l[r];
      float *dst = part_o + (part + row) * Mainloop::DV;
      for (int d = 0; d < Mainloop::DV; d += XE2T_SG_SIZE)
        Mainloop::Ops::store(dst + d, Mainloop::Ops::load(&st[h].o[r][d]));
    }
  }
}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void xe2t_sdpa_decode_combine(const float *part_o, const float *part_ml, xe2t_elem *o,
                              int q_len, int kv_len, int heads_q, int heads_kv,
                              int kv_chunk XE2T_KV_SCALE_PARAM) {
  using Ops = Mainloop::Ops;
  using vec = Mainloop::vec;
  const auto it = syclext::this_work_item::get_nd_item<2>();
  const int bh = static_cast<int>(it.get_global_id(0));
  const int b = bh / heads_kv;
  const int hkv = bh % heads_kv;
  const int group = heads_q / heads_kv;
  const int rows = q_len * group;
  const int row = static_cast<int>(it.get_global_id(1));
  const int chunks = (kv_len + kv_chunk - 1) / kv_chunk;
  const size_t base = static_cast<size_t>(bh) * chunks * rows + row;  // partial of chunk c: + c * rows

  float m = xe2t::kNegInf;
  for (int c = 0; c < chunks; ++c) m = sycl::fmax(m, part_ml[(base + c * rows) * 2]);
  const float m_sub = m == xe2t::kNegInf ? 0.0f : m;
  float l = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const size_t p = (base + c * rows) * 2;
    l += part_ml[p + 1] * sycl::exp2(part_ml[p] - m_sub);
  }
  const float inv = (l > 0.0f ? 1.0f / l : 0.0f) XE2T_KV_V_SCALE(hkv);
  xe2t_elem *dst = o + ((static_cast<size_t>(b) * q_len + row / group) * heads_q +
                        hkv * group + row % group) * Mainloop::DV;
  for (int d = 0; d < Mainloop::DV; d += XE2T_SG_SIZE) {
    vec acc(0.0f);
    for (int c = 0; c < chunks; ++c) {
      const size_t p = base + c * rows;
      acc += Ops::load(part_o + p * Mainloop::DV + d) * vec(sycl::exp2(part_ml[p * 2] - m_sub));
    }
    Ops::store(dst + d, acc * vec(inv));
  }
}
