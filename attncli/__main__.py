from attncli.launch import main

main()
