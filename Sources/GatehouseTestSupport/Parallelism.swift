import CTestSupport

/// How the test process runs tests side by side (see Sources/CTestSupport/parallelism.c).
public enum TestParallelism {
    /// How many tests Swift Testing runs at once here: 8 unless
    /// `SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH` chose otherwise (0: unlimited).
    public static var width: Int { Int(gatehouse_test_parallelization_width()) }
}
