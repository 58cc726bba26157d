#include "kp/http_date.h"

#include <string.h>

/* Two digits at p; -1 if they are not. */
static int
two_digits(const char *p)
{
	if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9')
		return -1;
	return (p[0] - '0') * 10 + (p[1] - '0');
}

/* Days from 1970-01-01 to the given date of the proleptic Gregorian calendar. */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* "Nov" as 11; -1 for anything else. */
static int
month_of(const char *p)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

	for (int i = 0; i < 12; i++)
		if (memcmp(p, months + 3 * i, 3) == 0)
			return i + 1;
	return -1;
}

/* "08:49:37" at p, then the date it belongs to: false when any part is out of range. */
static bool
assemble(int year, int month, int day, const char *clock, int64_t *t)
{
	int hour = two_digits(clock), min = two_digits(clock + 3), sec = two_digits(clock + 6);

	if (clock[2] != ':' || clock[5] != ':' || year < 0 || month < 0 || day < 1 || day > 31 ||
	    hour < 0 || hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 60)
		return false;
	*t = days_from_civil(year, month, day) * 86400 + hour * 3600 + min * 60 + sec;
	return true;
}

bool
http_date_fixdate(const char *p, size_t n, int64_t *t)
{
	int y1, y2;

	if (n != 29 || p[3] != ',' || p[4] != ' ' || p[7] != ' ' || p[11] != ' ' || p[16] != ' ' ||
	    memcmp(p + 25, " GMT", 4) != 0)
		return false;
	y1 = two_digits(p + 12);
	y2 = two_digits(p + 14);
	return y1 >= 0 && y2 >= 0 &&
	       assemble(y1 * 100 + y2, month_of(p + 8), two_digits(p + 5), p + 17, t);
}

/* "Sunday, 06-Nov-94 08:49:37 GMT": a day name of 6 to 9 letters, then 23 fixed bytes. */
static bool
rfc850_date(const char *p, size_t n, int64_t *t)
{
	const char *comma = memchr(p, ',', n < 11 ? n : 11);
	const char *d;
	int yy;

	if (!comma || comma - p < 6 || n - (size_t)(comma - p) != 24)
		return false;
	d = comma + 2;
	if (comma[1] != ' ' || d[2] != '-' || d[6] != '-' || d[9] != ' ' ||
	    memcmp(d + 18, " GMT", 4) != 0 || (yy = two_digits(d + 7)) < 0)
		return false;
	return assemble(yy < 70 ? 2000 + yy : 1900 + yy, month_of(d + 3), two_digits(d), d + 10, t);
}

/* "Sun Nov  6 08:49:37 1994": the day padded with a space, not a zero. */
static bool
asctime_date(const char *p, size_t n, int64_t *t)
{
	int day, y1, y2;

	if (n != 24 || p[3] != ' ' || p[7] != ' ' || p[10] != ' ' || p[19] != ' ')
		return false;
	day = p[8] == ' ' ? two_digits((const char[]){'0', p[9]}) : two_digits(p + 8);
	y1 = two_digits(p + 20);
	y2 = two_digits(p + 22);
	return y1 >= 0 && y2 >= 0 && assemble(y1 * 100 + y2, month_of(p + 4), day, p + 11, t);
}

bool
http_date_parse(const char *p, size_t n, int64_t *t)
{
	return http_date_fixdate(p, n, t) || rfc850_date(p, n, t) || asctime_date(p, n, t);
}
