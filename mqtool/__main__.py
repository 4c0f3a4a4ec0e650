from mqtool.entry import main

main()
