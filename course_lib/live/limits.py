"""How many events the live view takes: a token bucket per learner, and one for unknown tokens.

A learner's bucket holds `burst` events and refills at `per_minute`: a lab's honest pace (a
check cell run again and again, a lesson's "Run All") stays far inside it, while a loop that
posts as fast as it can is refused after the burst, without reaching the database. Tokens the
service has not seen draw from one shared bucket before the hub is asked who owns them, so a
flood of made-up tokens cannot turn into a flood of requests to the hub.
"""
import time


class Bucket:
    """`capacity` tokens, refilled at `rate` per second; `take()` spends one if there is one."""

    def __init__(self, capacity, rate, now=None):
        self.capacity, self.rate = float(capacity), float(rate)
        self.tokens = self.capacity
        self.stamp = time.monotonic() if now is None else now

    def take(self, now=None):
        """Whether a token was there (and is now spent)."""
        now = time.monotonic() if now is None else now
        self.tokens = min(self.capacity, self.tokens + max(0.0, now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def retry_after(self):
        """Seconds until the next token, rounded up."""
        return max(1, int((1 - self.tokens) / self.rate + 0.999)) if self.rate else 3600


class RateLimit:
    """A bucket per key (a learner's name), made full the first time the key is seen.

    Buckets that have refilled completely carry no information and are dropped every so often,
    so the table holds only those learners who posted in the last few minutes.
    """

    def __init__(self, burst=30, per_minute=20):
        if burst < 1 or per_minute <= 0:
            raise ValueError(f"a rate limit needs burst >= 1 and per_minute > 0; got burst={burst}, "
                             f"per_minute={per_minute}")
        self.burst, self.rate = burst, per_minute / 60.0
        self.buckets = {}
        self.swept = None   # when full buckets were last dropped

    def allow(self, key, now=None):
        """Whether `key` may post one more event now (and that event counted)."""
        now = time.monotonic() if now is None else now
        if self.swept is None:
            self.swept = now
        elif now - self.swept > self.burst / self.rate:
            self._sweep(now)
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = Bucket(self.burst, self.rate, now)
        return bucket.take(now)

    def retry_after(self, key):
        bucket = self.buckets.get(key)
        return bucket.retry_after() if bucket else 1

    def _sweep(self, now):
        full = self.burst / self.rate
        self.buckets = {k: b for k, b in self.buckets.items() if now - b.stamp < full}
        self.swept = now
