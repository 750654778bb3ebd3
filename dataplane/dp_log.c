/* dp_log.c - registers pboxd's DPDK log type `pbox` (see dp_log.h). */
#include "dataplane/dp_log.h"

RTE_LOG_REGISTER(dp_logtype, pbox, INFO);
