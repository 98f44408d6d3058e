// SPDX-License-Identifier: BSD-2-Clause
// flit from C++: the README's example.
//   g++ -std=c++20 pubsub.cpp $(pkg-config --cflags --libs flit)
#include <cstring>
#include <iostream>
#include <flit/flit.hpp>

int main()
try {
	int got = 0;
	flit::context ctx;                                  // $FLIT_CONFIG if set
	flit::subscriber sub(ctx, "prices.*", [&got](flit::message m) {
		if (m.kind() == flit::msg_kind::data) {         // also bos, eos, loss
			std::cout << m.topic() << " #" << m.seq() << ": " << m.text() << '\n';
			got++;
		}
	}, { .pattern = true });
	flit::publisher pub(ctx, "prices.eur");

	while (pub.receivers() < 1)                         // discovery is asynchronous
		ctx.poll();
	if (auto rc = pub.send("1.0842"); !rc)              // never throws: a result
		std::cerr << "send: " << rc.str() << '\n';
	if (auto [buf, rc] = pub.claim(6); rc) {            // zero-copy: write in place
		std::memcpy(buf.data(), "1.0843", 6);
		(void)pub.commit(6);
	}
	while (got < 2)                                     // callbacks run here,
		ctx.poll();                                 // on this thread
} catch (const flit::error &e) {                        // set-up failures throw
	std::cerr << "flit: " << e.what() << '\n';
	return 1;
}
