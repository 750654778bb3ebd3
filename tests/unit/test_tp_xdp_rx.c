/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tp_xdp_rx.c - the AF_XDP transport's receive path (client/transport/tp_xdp.c,
 * included for its static functions) on rx and fill rings in plain memory,
 * laid out as the kernel lays them out, so no socket is needed; the fill
 * ring is a share's (client/transport/xdp_share.h), as every socket's is.
 *
 * The rule under test: every frame the kernel puts in the rx ring comes
 * out of rx_burst exactly once and in order, however many a burst may
 * take (fewer than the ring holds) and however a frame is split into
 * descriptors; the shared consumer index follows what was returned (a lag
 * makes the kernel see frames unread: the socket stays readable and the
 * progress thread spins in poll), and every chunk goes back to the fill
 * ring.
 */
#include "client/transport/tp_xdp.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define RING     512u              /* rx and fill ring entries, and chunks */
#define PORT     5000
#define BOX_PORT 7471

struct fake {
	struct xdp_tp x;
	struct xdp_share sh;
	struct transport t;
	uint32_t rx_prod, rx_cons, fill_prod, fill_cons, fill_flags;
	struct xdp_desc rx_ring[RING];
	uint64_t fill_ring[RING];
	uint32_t next_chunk;           /* chunks are handed out round robin */
	struct netpath box;            /* the box's side, to build frames with */
};

static int setup(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct xdp_tp *x = &f->x;

	assert_non_null(f);
	x->area = calloc(RING, XDP_CHUNK);
	x->np = calloc(1, sizeof(*x->np));
	assert_non_null(x->np);
	x->done = calloc(XDP_RX_PEEK, sizeof(*x->done));
	x->slot_chunks = 3;                       /* a 9000-byte frame */
	x->stage_frame = (size_t)x->slot_chunks * XDP_CHUNK;
	x->stage = malloc(TP_RX_BURST * x->stage_frame);
	assert_non_null(x->area);
	assert_non_null(x->done);
	assert_non_null(x->stage);
	x->udp_fd = x->xsk_fd = -1;
	x->port = PORT;
	x->rx = (struct xsk_ring_cons){ .mask = RING - 1, .size = RING,
					.producer = &f->rx_prod, .consumer = &f->rx_cons,
					.ring = f->rx_ring };
	/* a producer ring's cached_cons runs a ring ahead of its consumer */
	pthread_mutex_init(&f->sh.lock, NULL);
	x->sh = &f->sh;
	f->sh.fill = (struct xsk_ring_prod){ .cached_cons = RING, .mask = RING - 1, .size = RING,
					  .producer = &f->fill_prod, .consumer = &f->fill_cons,
					  .ring = f->fill_ring, .flags = &f->fill_flags };
	inet_pton(AF_INET, "10.9.0.2", &x->np[0].src);
	memcpy(x->np[0].src_mac, "\x02\0\0\0\0\x02", 6);
	memcpy(x->np[0].dst_mac, "\x02\0\0\0\0\x01", 6);
	inet_pton(AF_INET, "10.9.0.1", &f->box.src);
	memcpy(f->box.src_mac, x->np[0].dst_mac, 6);
	memcpy(f->box.dst_mac, x->np[0].src_mac, 6);
	f->t.priv = x;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fake *f = *state;

	pthread_mutex_destroy(&f->sh.lock);
	free(f->x.area);
	free(f->x.np);
	free(f->x.done);
	free(f->x.stage);
	free(f);
	return 0;
}

/* The kernel's side: frame `id` (a RESULT of len payload bytes, id in its
 * first four) written into as many chunks as it needs, its descriptors
 * published. */
static void kernel_rx(struct fake *f, uint32_t id, uint32_t len)
{
	static uint8_t frame[3 * XDP_CHUNK];
	uint8_t payload[9000] = { 0 };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(PORT),
				  .sin_addr = f->x.np[0].src };
	struct wire_msg h = { .type = WIRE_RESULT, .seg = id };

	assert_true(len >= sizeof(id) && RAWFRAME_HDRS + WIRE_HDR_LEN + len <= sizeof(frame));
	memcpy(payload, &id, sizeof(id));
	size_t flen = rawframe_build(frame, &f->box, BOX_PORT, &to, &h, payload, len);
	for (size_t off = 0; off < flen; off += XDP_CHUNK) {
		uint64_t addr = (uint64_t)(f->next_chunk++ % RING) * XDP_CHUNK;
		size_t part = flen - off < XDP_CHUNK ? flen - off : XDP_CHUNK;
		memcpy(f->x.area + addr, frame + off, part);
		f->rx_ring[f->rx_prod & (RING - 1)] = (struct xdp_desc){
			.addr = addr, .len = (uint32_t)part,
			.options = off + part < flen ? XDP_PKT_CONTD : 0 };
		f->rx_prod++;
	}
}

/* rx_burst until it returns nothing twice: the ids returned, in order,
 * into ids (room for max_ids). */
static unsigned drain_rx(struct fake *f, unsigned burst, uint32_t *ids, unsigned max_ids)
{
	struct tp_dgram d[TP_RX_BURST];
	unsigned got = 0, empty = 0;
	char err[128];

	while (empty < 2) {
		int n = xdp_rx_burst(&f->t, d, burst, err, sizeof(err));
		assert_true(n >= 0 && (unsigned)n <= burst);
		empty = n ? 0 : empty + 1;
		for (int i = 0; i < n; i++) {
			assert_true(d[i].len >= WIRE_HDR_LEN + sizeof(uint32_t));
			assert_true(got < max_ids);
			memcpy(&ids[got++], d[i].data + WIRE_HDR_LEN, sizeof(uint32_t));
		}
	}
	return got;
}

static void check_all_once(struct fake *f, const uint32_t *ids, unsigned got, uint32_t first,
			   unsigned want, uint32_t descs)
{
	assert_int_equal(got, want);
	for (unsigned i = 0; i < got; i++)
		assert_int_equal(ids[i], first + i);
	/* all read: the kernel sees an empty ring, and has every chunk back */
	assert_int_equal(f->rx_cons, f->rx_prod);
	assert_int_equal(f->fill_prod, descs);
	assert_int_equal(f->x.ndone, 0);
	assert_int_equal(f->x.ctr.rx_bad, 0);
}

static void rx__more_frames_than_a_burst_each_once(void **state)
{
	struct fake *f = *state;
	uint32_t ids[400];

	for (uint32_t i = 0; i < 200; i++)   /* 200 waiting, bursts of 64 */
		kernel_rx(f, i, 100);
	check_all_once(f, ids, drain_rx(f, TP_RX_BURST, ids, 400), 0, 200, 200);
	for (uint32_t i = 200; i < 400; i++) /* again, across the ring's wrap */
		kernel_rx(f, i, 1000);
	check_all_once(f, ids, drain_rx(f, 50, ids, 400), 200, 200, 400);
}

static void rx__multi_buffer_frames_across_peeks_each_once(void **state)
{
	struct fake *f = *state;
	uint32_t ids[200];

	/* 100 frames of 3 descriptors: more than one peek (XDP_RX_PEEK 256)
	 * holds, so a frame's parts straddle two peeks */
	for (uint32_t i = 0; i < 100; i++)
		kernel_rx(f, i, 8800);
	check_all_once(f, ids, drain_rx(f, TP_RX_BURST, ids, 200), 0, 100, 300);
	for (uint32_t i = 100; i < 150; i++) /* mixed sizes, across the wrap */
		kernel_rx(f, i, i % 2 ? 8800 : 64);
	check_all_once(f, ids, drain_rx(f, 7, ids, 200), 100, 50, 300 + 25 * 3 + 25);
}

/* Frames longer than a chunk less the kernel's headroom need
 * multi-buffer receive: MTU 4000 does (its frames were dropped). */
static void sg__from_a_chunk_less_the_headroom(void **state)
{
	(void)state;
	assert_false(rx_needs_sg(1500 + 14));
	assert_false(rx_needs_sg(XDP_CHUNK - XDP_HEADROOM));
	assert_true(rx_needs_sg(XDP_CHUNK - XDP_HEADROOM + 1));
	assert_true(rx_needs_sg(4000 + 14));
	assert_true(rx_needs_sg(9000 + 14));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sg__from_a_chunk_less_the_headroom),
		cmocka_unit_test_setup_teardown(rx__more_frames_than_a_burst_each_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(rx__multi_buffer_frames_across_peeks_each_once,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
