def index_run(
    data: bytes | memoryview,
    position: int,
    count: int,
    base: int,
    largest: int,
    stride: int,
    sample_bytes: int,
    clock_bits: int,
    times: list[int],
    offsets: list[int],
    ordinals: list[int],
    /,
) -> tuple[int, int, int]: ...
def sample_ts(data: bytes | memoryview, position: int, size: int, /) -> int | None: ...
