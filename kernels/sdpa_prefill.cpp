// Flash-attention forward (prefill): one work-group per (BQ rows, batch, KV head); each
// work-group streams every K/V block its rows may see and writes normalized O.
// nd-range: global (batch * heads_kv, row_tiles * NT), local (1, NT).
// With KV_STAGE 2, xe2t_sdpa_pack_kv first packs every K/V block into the fp32 tiles the
// mainloop reads (tiles [batch, heads_kv, blocks, TILE_FLOATS]); otherwise tiles is unused.
#include "sycl_device.hpp"

#include "sdpa_config.hpp"

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void xe2t_sdpa_prefill(const xe2t_elem *q, const xe2t_kv *k, const xe2t_kv *v, xe2t_elem *o,
                       float *tiles, int q_len, int kv_len, int heads_q, int heads_kv,
                       float qscale, int causal XE2T_KV_SCALE_PARAM) {
  static syclexp::work_group_static<float[Mainloop::LOCAL_FLOATS]> local;
  const auto it = syclext::this_work_item::get_nd_item<2>();
  const int b = static_cast<int>(it.get_group(0)) / heads_kv;
  const int hkv = static_cast<int>(it.get_group(0)) % heads_kv;
  const int t = static_cast<int>(it.get_local_id(1));
  const xe2t::Geometry g{q_len, kv_len, heads_q, heads_kv, heads_q / heads_kv, causal,
                         qscale XE2T_KV_K_SCALE(hkv)};

  const Mainloop::Slice slice[1] = {
      Mainloop::Slice::of(q, k, v, g, b, hkv, XE2T_KV_STAGE == 2 ? tiles : nullptr)};

  const int tile_row0 = static_cast<int>(it.get_group(1)) * XE2T_BQ;
  const int row0 = tile_row0 + t * XE2T_TM;
  const int kb1 = Mainloop::block_end(g, sycl::min(tile_row0 + XE2T_BQ, g.rows()) - 1);

  Mainloop::State state[1];
  Mainloop::run<1>(slice, row0, t, 0, kb1, &local[0], it.get_group(), state);
  const Mainloop::State &st = state[0];

  for (int r = 0; r < XE2T_TM; ++r) {
    const int row = row0 + r;
    if (row >= g.rows()) break;
    // Rows that see no key at all (causal, q_len > kv_len) have l = 0 and output 0, as FA2.
    const Mainloop::vec inv((st.l[r] > 0.0f ? 1.0f / st.l[r] : 0.0f) XE2T_KV_V_SCALE(hkv));
    xe2t_elem *dst = o + slice[0].o_offset(q, row);
    for (int d = 0; d < Mainloop::DV; d += XE2T_SG_SIZE)
      Mainloop::Ops::store(dst + d, Mainloop::Ops::load(&st.o[r][d]) * inv);
  }
}

// One work-item per (batch * KV head, block): nd-range global (batch * heads_kv, blocks),
// local (1, 1). The tile layout and the fp32 conversion are the mainloop's own staging.
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void xe2t_sdpa_pack_kv(const xe2t_kv *k, const xe2t_kv *v, float *tiles, int kv_len,
                       int heads_kv) {
  const auto it = syclext::this_work_item::get_nd_item<2>();
  const int b = static_cast<int>(it.get_global_id(0)) / heads_kv;
  const int hkv = static_cast<int>(it.get_global_id(0)) % heads_kv;
  const int kb = static_cast<int>(it.get_global_id(1));
  // A geometry of K/V only: one query row, no Q pointer is ever read (Slice needs one).
  const xe2t::Geometry g{1, kv_len, heads_kv, heads_kv, 1, 0, 0.0f};
  const Mainloop::Slice slice =
      Mainloop::Slice::of(reinterpret_cast<const xe2t_elem *>(k), k, v, g, b, hkv, tiles);
  Mainloop::stage(slice, kb, 0, 1, slice.tile(kb));
}
