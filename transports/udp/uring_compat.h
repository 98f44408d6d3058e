/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * io_uring constants that liburing 2.3 / uapi 6.1 have and older headers
 * may not, for flit's io_uring code (transports/udp/uring_io.c, and the
 * bare ping-pong of tools/udp_floor.c that measures the same path).
 */
#ifndef FLIT_URING_COMPAT_H
#define FLIT_URING_COMPAT_H

#include <liburing.h>

#ifndef IORING_SETUP_R_DISABLED
#define IORING_SETUP_R_DISABLED (1U << 6)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG (1U << 9)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif
#ifndef IORING_SQ_CQ_OVERFLOW
#define IORING_SQ_CQ_OVERFLOW (1U << 1)
#endif
#ifndef IORING_SQ_TASKRUN
#define IORING_SQ_TASKRUN (1U << 2)
#endif

#endif /* FLIT_URING_COMPAT_H */
