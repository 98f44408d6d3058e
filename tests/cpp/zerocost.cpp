// SPDX-License-Identifier: BSD-2-Clause
/*
 * The C++ side of the zero-cost check: the twins of zerocost.c's functions
 * through <flit/flit.hpp>, extern "C" for their names only.
 */
#include <cstring>
#include <flit/flit.hpp>

extern "C" {
int zc_send(flit::publisher &p, std::span<const std::byte> msg);
int zc_send_retry(flit::publisher &p, std::span<const std::byte> msg);
int zc_claim_commit(flit::publisher &p, std::span<const std::byte> msg);
flit_msg_fn zc_on_msg_fn(void);
void zc_ref_probe(void *t, flit::context &ctx);
}

int zc_send(flit::publisher &p, std::span<const std::byte> msg)
{
	return p.send(msg).value();
}

int zc_send_retry(flit::publisher &p, std::span<const std::byte> msg)
{
	flit::result rc;

	while ((rc = p.send(msg)) == flit::status::back_pressured)
		;
	return rc.value();
}

int zc_claim_commit(flit::publisher &p, std::span<const std::byte> msg)
{
	auto [buf, rc] = p.claim(msg.size());

	if (!rc)
		return rc.value();
	std::memcpy(buf.data(), msg.data(), msg.size());
	return p.commit(msg.size()).value();
}

/* The subscriber's trampoline for a callable that holds its state (the twin
 * of the C callback, whose arg is the state).  Instantiated by taking the
 * address the subscriber constructor would pass to flit_sub_new. */
struct tally {
	unsigned long long msgs = 0, bytes = 0;
	void operator()(flit::message m) noexcept
	{
		if (m.is_data()) {
			msgs++;
			bytes += m.size();
		}
	}
};

/* and a lambda capturing its state by reference: not a twin (one more
 * load, the captured pointer), shown by tools/bench-cpp.sh */
void zc_ref_probe(void *t, flit::context &ctx)
{
	flit::subscriber s(ctx, "x", [&st = *static_cast<tally *>(t)](flit::message m) {
		if (m.is_data()) {
			st.msgs++;
			st.bytes += m.size();
		}
	});
}

flit_msg_fn zc_on_msg_fn(void)
{
	return &flit::detail::sub_trampoline<tally>;
}
