"""The workloads of peer_taichi.py in Quadrants, the fork of Taichi that
ctgrad's autodiff is compared with (the same language under the name qd)."""
import peer_taichi as taichi_peer

taichi_peer.NAME, taichi_peer.MODULE, taichi_peer.ALIAS = "Quadrants", "quadrants", "qd"
taichi_peer.INIT_OPTIONS = {"ad_stack_experimental_enabled": True}
taichi_peer.WRAP_WAVE_LOOP = True
NAME = taichi_peer.NAME
init = taichi_peer.init
subnormal_product = taichi_peer.subnormal_product
make = taichi_peer.make
