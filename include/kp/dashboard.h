/*
 * The live dashboard: one self-contained page (src/dashboard.html, no
 * external assets) that the stats listener serves at / and that polls
 * /stats. Compiled in as bytes by CMake; absent with -DKP_DASHBOARD=OFF.
 */
#ifndef KP_DASHBOARD_H
#define KP_DASHBOARD_H

#include <stddef.h>

extern const unsigned char dashboard_page[];
extern const size_t dashboard_page_len;

#endif
