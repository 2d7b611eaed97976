// Decode (q_len 1..16) of the xmx family: two-phase split-KV attention.
// Phase 1 (xe2t_xmx_decode_split): one work-group per (BQ rows, KV chunk, batch, KV head) runs
//   the xmx mainloop over the chunk's K blocks, merges the SG_K key shares and writes the
//   chunk's partial row max (log2 domain), sum and unnormalized O to scratch, padding rows
//   included (rows are q_len * G padded to whole tiles). nd-range: global (batch * heads_kv,
//   row_tiles * chunks * DV_SPLITS * SG_Q * SG_K * 16), local (1, SG_Q * SG_K * 16).
//   Latent decode (Dv 512) splits V's columns among DV_SPLITS work-groups: on Xe2 an 8-row
//   fragment of O [8, 512] fp32 alone would fill the register file. Each computes the same
//   scores (Q K^T over all of D; the repeated K reads hit the cache) and its Dv / DV_SPLITS
//   columns of O; the first writes the row max and sum.
// Phase 2 (xe2t_xmx_decode_combine): one work-item per output element rescales and sums the
//   partials. nd-range: global (batch * heads_kv * q_len * G, Dv), local (1, 16).
// Scratch: part_o [batch * heads_kv, chunks, padded rows, Dv], part_ml [..., padded rows, 2].
#include "sycl_device.hpp"

#include "sdpa_xmx_config.hpp"

namespace syclext = sycl::ext::oneapi;

XE2T_XMX_KERNEL
void xe2t_xmx_decode_split(const xe2t_elem *q, const xe2t_kv *k, const xe2t_kv *v,
                           float *part_o, float *part_ml, int q_len, int kv_len, int heads_q,
                           int heads_kv, float qscale, int causal,
                           int kv_chunk XE2T_KV_SCALE_PARAM) {
  using xe2t::xmx::kM;
  using xe2t::xmx::kN;
  static syclexp::work_group_static<float[Mainloop::LOCAL_FLOATS]> local;
  const auto it = syclext::this_work_item::get_nd_item<2>();
  const auto sg = it.get_sub_group();
  const int bh = static_cast<int>(it.get_group(0));
  const int sgid = static_cast<int>(sg.get_group_linear_id());
  const int sq = sgid % XmxShape::SGQ;
  const int sk = sgid / XmxShape::SGQ;
  const xe2t::Geometry g{q_len, kv_len, heads_q, heads_kv, heads_q / heads_kv, causal,
                         qscale XE2T_KV_K_SCALE(bh % heads_kv)};
  // Work-group index 1 = (tile * chunks + chunk) * DV_SPLITS + V split.
  constexpr int kSplits = XmxShape::DV_SPLITS;
  const int v_split = kSplits > 1 ? static_cast<int>(it.get_group(1)) % kSplits : 0;
  const auto slice = Mainloop::Slice::of(q, k, v, g, bh / heads_kv, bh % heads_kv,
                                         v_split * XmxShape::DV);
  const auto sm = Mainloop::Smem::of(&local[0]);

  const int chunks = (kv_len + kv_chunk - 1) / kv_chunk;
  const int chunk = static_cast<int>(it.get_group(1)) / kSplits % chunks;
  const int tile = static_cast<int>(it.get_group(1)) / kSplits / chunks;
  const int tile_row0 = tile * XmxShape::BQ;
  Mainloop::stage_q(slice, tile_row0, sm.q, static_cast<int>(it.get_local_linear_id()),
                    XmxShape::NSG * kN);
  sycl::group_barrier(it.get_group());

  const int blocks_per_chunk = kv_chunk / XmxShape::BK;
  const int kb0 = chunk * blocks_per_chunk;
  const int kb1 = sycl::min(kb0 + blocks_per_chunk,
                            Mainloop::block_end(g, sycl::min(tile_row0 + XmxShape::BQ,
                                                             g.rows()) - 1));
  Mainloop::State st;
  Mainloop::run(sg, slice, sm, tile_row0, sq, sk, kb0, sycl::max(kb0, kb1), st);
  Mainloop::combine(it.get_group(), sg, sm, sq, sk, st);
  if (sk != 0) return;

  const int padded_rows =
      static_cast<int>(it.get_group_range(1)) / kSplits / chunks * XmxShape::BQ;
  const size_t part = (static_cast<size_t>(bh) * chunks + chunk) * padded_rows + tile_row0 +
                      sq * XmxShape::RPS;
  // Lanes 2i and 2i + 1 hold row i of a RowVec: the even one writes it.
  const int lane_row = XmxOps::row_of_lane(sg);
  XE2T_XMX_FRAGMENT_LOOP
  for (int mf = 0; mf < XmxShape::MF; ++mf) {
    const size_t row = part + mf * kM;
    XE2T_XMX_FRAGMENT_LOOP
    for (int n = 0; n < XmxShape::DV / kN; ++n)
      XmxOps::store(sg, st.o[mf][n], part_o + row * XmxShape::DV_ROW + v_split * XmxShape::DV +
                                         n * kN, XmxShape::DV_ROW);
    if (v_split == 0 && sg.get_local_linear_id() % 2 == 0) {
      part_ml[(row + lane_row) * 2] = st.m[mf];
      part_ml[(row + lane_row) * 2 + 1] = st.l[mf];
    }
  }
}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void xe2t_xmx_decode_combine(const float *part_o, const float *part_ml, xe2t_elem *o, int q_len,
                             int kv_len, int heads_q, int heads_kv,
                             int kv_chunk XE2T_KV_SCALE_PARAM) {
  const auto it = syclext::this_work_item::get_nd_item<2>();
  const int group = heads_q / heads_kv;
  const int rows = q_len * group;
  const int padded_rows = (rows + XmxShape::BQ - 1) / XmxShape::BQ * XmxShape::BQ;
  const int bh = static_cast<int>(it.get_global_id(0)) / rows;
  const int row = static_cast<int>(it.get_global_id(0)) % rows;
  const int col = static_cast<int>(it.get_global_id(1));
  const int chunks = (kv_len + kv_chunk - 1) / kv_chunk;
  const size_t base = static_cast<size_t>(bh) * chunks * padded_rows + row;  // chunk c: + c * padded_rows

  float m = xe2t::kNegInf;
  for (int c = 0; c < chunks; ++c) m = sycl::fmax(m, part_ml[(base + c * padded_rows) * 2]);
  const float m_sub = m == xe2t::kNegInf ? 0.0f : m;
  float l = 0.0f;
  float acc = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const size_t p = base + static_cast<size_t>(c) * padded_rows;
    const float w = sycl::exp2(part_ml[p * 2] - m_sub);
    l += part_ml[p * 2 + 1] * w;
    acc += part_o[p * XmxShape::DV_ROW + col] * w;
  }
  const int b = bh / heads_kv;
  const int hkv = bh % heads_kv;
  o[((static_cast<size_t>(b) * q_len + row / group) * heads_q + hkv * group + row % group) *
        XmxShape::DV_ROW + col] =
      xe2t::xmx::from_float<xe2t_elem>((l > 0.0f ? acc / l : 0.0f) XE2T_KV_V_SCALE(hkv));
}
