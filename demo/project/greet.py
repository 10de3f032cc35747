"""A tiny example project for trying editfs."""


def greet(name):
    print("Hello, " + name)


def farewell(name):
    print("Goodbye, " + name)


if __name__ == "__main__":
    greet("world")
    farewell("world")
