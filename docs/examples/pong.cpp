// SPDX-License-Identifier: BSD-2-Clause
/*
 * pong: the reflector of flit-pong in C++ (<flit/flit.hpp>), for measuring
 * the C++ API against the C one with the same ping:
 *
 *	taskset -c 1 ./pong PREFIX &
 *	flit-pong --role ping -p PREFIX --cpus 0,1
 *
 * Subscribes to PREFIX.ping and republishes every payload on PREFIX.pong from
 * inside the callback, as `flit-pong --role pong` does; ends after echoing
 * the ping's BYE (first 8 bytes all ones) or at the ping's end of stream.
 *	g++ -std=c++20 -O2 pong.cpp $(pkg-config --cflags --libs flit)
 */
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <flit/flit.hpp>

int main(int argc, char **argv)
try {
	if (argc != 2) {
		std::fprintf(stderr, "usage: pong PREFIX\n");
		return 2;
	}
	const std::string prefix = argv[1];
	bool done = false;
	int err = 0;

	flit::context ctx;
	flit::publisher pub(ctx, prefix + ".pong");
	flit::subscriber sub(ctx, prefix + ".ping", [&](flit::message m) {
		if (m.kind() == flit::msg_kind::eos)
			done = true;
		if (m.kind() != flit::msg_kind::data || err)
			return;
		flit::result rc;
		while ((rc = pub.send(m.data())) == flit::status::back_pressured ||
		       rc == flit::status::not_connected)
			;       // the ping reads while it waits: brief
		if (rc.failed())
			err = rc.value();
		std::uint64_t seq = 0;
		if (m.size() >= 8)
			std::memcpy(&seq, m.data().data(), 8);
		if (seq == UINT64_MAX)
			done = true;    // BYE, echoed
	});
	while (!done && !err)
		if (int n = ctx.poll(); n < 0)
			throw flit::error(-n, "flit_ctx_poll");
	if (err) {
		std::fprintf(stderr, "pong: echo: %s\n", flit::result(err).str());
		return 1;
	}
	(void)pub.flush();
	return 0;
} catch (const flit::error &e) {
	std::fprintf(stderr, "pong: %s\n", e.what());
	return 1;
}
