// Flash-attention forward (prefill) of the xmx family: one work-group per (BQ rows, batch, KV
// head) streams every K/V block its rows may see (sdpa_xmx_mainloop.hpp), merges the SG_K key
// shares and writes normalized O.
// nd-range: global (batch * heads_kv, row_tiles * SG_Q * SG_K * 16), local (1, SG_Q * SG_K * 16).
#include "sycl_device.hpp"

#include "sdpa_xmx_config.hpp"

namespace syclext = sycl::ext::oneapi;

static_assert(XmxShape::DV_SPLITS == 1, "the prefill computes all of V's columns");

XE2T_XMX_KERNEL
void xe2t_xmx_prefill(const xe2t_elem *q, const xe2t_kv *k, const xe2t_kv *v, xe2t_elem *o,
                      int q_len, int kv_len, int heads_q, int heads_kv, float qscale,
                      int causal XE2T_KV_SCALE_PARAM) {
  using xe2t::xmx::kM;
  using xe2t::xmx::kN;
  static syclexp::work_group_static<float[Mainloop::LOCAL_FLOATS]> local;
  const auto it = syclext::this_work_item::get_nd_item<2>();
  const auto sg = it.get_sub_group();
  const int b = static_cast<int>(it.get_group(0)) / heads_kv;
  const int hkv = static_cast<int>(it.get_group(0)) % heads_kv;
  const int sgid = static_cast<int>(sg.get_group_linear_id());
  const int sq = sgid % XmxShape::SGQ;
  const int sk = sgid / XmxShape::SGQ;
  const xe2t::Geometry g{q_len, kv_len, heads_q, heads_kv, heads_q / heads_kv, causal,
                         qscale XE2T_KV_K_SCALE(hkv)};
  const auto slice = Mainloop::Slice::of(q, k, v, g, b, hkv);
  const auto sm = Mainloop::Smem::of(&local[0]);

  const int tile_row0 = static_cast<int>(it.get_group(1)) * XmxShape::BQ;
  Mainloop::stage_q(slice, tile_row0, sm.q, static_cast<int>(it.get_local_linear_id()),
                    XmxShape::NSG * kN);
  sycl::group_barrier(it.get_group());

  const int kb1 =
      Mainloop::block_end(g, sycl::min(tile_row0 + XmxShape::BQ, g.rows()) - 1);
  Mainloop::State st;
  Mainloop::run(sg, slice, sm, tile_row0, sq, sk, 0, kb1, st);
  Mainloop::combine(it.get_group(), sg, sm, sq, sk, st);
  if (sk != 0) return;

  const int row0 = tile_row0 + sq * XmxShape::RPS;
  // Rows that see no key at all (causal, q_len > kv_len) have l = 0 and output 0, as FA2.
  float inv[XmxShape::MF];
  XE2T_XMX_FRAGMENT_LOOP
  for (int mf = 0; mf < XmxShape::MF; ++mf)
    inv[mf] = (st.l[mf] > 0.0f ? 1.0f / st.l[mf] : 0.0f) XE2T_KV_V_SCALE(hkv);
  xe2t_elem *const o_slice = o + slice.o_offset(q, 0);
  if (g.group == 1 || g.heads_kv == 1) {
    // MHA and MQA keep the packed rows at one pitch in O (heads_q * Dv, or Dv): the tile is a
    // 2D block surface, and each fragment one block store.
    const int pitch = (g.group == 1 ? g.heads_q : 1) * XmxShape::DV;
    const xe2t::xe::Surface out{o_slice, XmxShape::DV * 2, g.rows(), pitch * 2};
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < XmxShape::MF; ++mf)
      XE2T_XMX_FRAGMENT_LOOP
      for (int n = 0; n < XmxShape::DV / kN; ++n)
        XmxOps::store_scaled(sg, st.o[mf][n], inv[mf], out, n * kN, row0 + mf * kM);
    return;
  }
  // Other GQA groups: packed rows jump between query positions; stored element by element.
  XE2T_XMX_FRAGMENT_LOOP
  for (int mf = 0; mf < XmxShape::MF; ++mf) {
    xe2t_elem *out[kM];  // O row of each fragment row; null past the last row
    XE2T_XMX_FRAGMENT_LOOP
    for (int r = 0; r < kM; ++r) {
      const int row = row0 + mf * kM + r;
      out[r] = row < g.rows() ? o + slice.o_offset(q, row) : nullptr;
    }
    XE2T_XMX_FRAGMENT_LOOP
    for (int n = 0; n < XmxShape::DV / kN; ++n)
      XmxOps::apply(sg, st.o[mf][n], [&](float &x, int r, int c) {
        const float y = x * XmxOps::row(sg, inv[mf], r);  // every lane takes part in the broadcast
        if (out[r] != nullptr) out[r][n * kN + c] = xe2t::xmx::from_float<xe2t_elem>(y);
      });
  }
}
